package envoystats

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/DataDog/datadog-go/v5/statsd"
	gostats "github.com/lyft/gostats"
)

// Mogrifier is one of envoyproxy's DogStatsD "mogrifiers"
// (USE_DOG_STATSD_MOGRIFIERS): a stat name matching Pattern is sent as
// Name with Tags, where $0, $1... in Name and in the tags' values are the
// pattern's match and groups. It turns the stats key segments of a name into
// tags, which Datadog aggregates by.
type Mogrifier struct {
	Pattern *regexp.Regexp
	Name    string
	Tags    map[string]string
}

var groupRef = regexp.MustCompile(`\$\d+`)

// expand puts the groups in template's $0, $1...; a reference to a group
// the pattern lacks stays as written, as envoyproxy leaves it.
func expand(template string, groups []string) string {
	return groupRef.ReplaceAllStringFunc(template, func(ref string) string {
		if i, err := strconv.Atoi(ref[1:]); err == nil && i < len(groups) {
			return groups[i]
		}
		return ref
	})
}

// dogStatsd is envoyproxy's USE_DOG_STATSD sink: DataDog's client, each
// stat's name split into its name and the tags gostats wrote into it
// (EXTRA_TAGS as name.__tag=value), then mogrified.
type dogStatsd struct {
	client     *statsd.Client
	mogrifiers []Mogrifier
	names      sync.Map // gostats name -> dogName
}

type dogName struct {
	name string
	tags []string
}

// NewDogStatsd sends to the DogStatsD agent at host:port (UDP), without the
// client's own aggregation, as envoyproxy does. Mogrifiers apply in the
// order given, the first that matches, as envoyproxy applies
// USE_DOG_STATSD_MOGRIFIERS.
func NewDogStatsd(host string, port int, mogrifiers []Mogrifier) (gostats.Sink, error) {
	c, err := statsd.New(net.JoinHostPort(host, strconv.Itoa(port)), statsd.WithoutClientSideAggregation())
	if err != nil {
		return nil, fmt.Errorf("dogstatsd sink: %w", err)
	}
	return &dogStatsd{client: c, mogrifiers: mogrifiers}, nil
}

// split turns a gostats name into a DogStatsD name and tags, once per name.
func (d *dogStatsd) split(name string) *dogName {
	if n, ok := d.names.Load(name); ok {
		return n.(*dogName)
	}
	base, tagged, _ := strings.Cut(name, ".__")
	var tags []string
	if tagged != "" {
		for _, pair := range strings.Split(tagged, ".__") {
			if k, v, ok := strings.Cut(pair, "="); ok {
				tags = append(tags, k+":"+v)
			}
		}
	}
	n := &dogName{name: base, tags: tags}
	for _, m := range d.mogrifiers {
		groups := m.Pattern.FindStringSubmatch(base)
		if groups == nil {
			continue
		}
		n.name = expand(m.Name, groups)
		for k, v := range m.Tags {
			n.tags = append(n.tags, k+":"+expand(v, groups))
		}
		break
	}
	actual, _ := d.names.LoadOrStore(name, n)
	return actual.(*dogName)
}

func (d *dogStatsd) FlushCounter(name string, v uint64) {
	n := d.split(name)
	_ = d.client.Count(n.name, int64(v), n.tags, 1)
}

func (d *dogStatsd) FlushGauge(name string, v uint64) {
	n := d.split(name)
	_ = d.client.Gauge(n.name, float64(v), n.tags, 1)
}

func (d *dogStatsd) FlushTimer(name string, ms float64) {
	n := d.split(name)
	_ = d.client.TimeInMilliseconds(n.name, ms, n.tags, 1)
}

func (d *dogStatsd) Flush() { _ = d.client.Flush() }

func (d *dogStatsd) close() { _ = d.client.Close() }

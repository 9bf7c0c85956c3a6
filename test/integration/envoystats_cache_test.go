package integration

import (
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// cacheModel is LOCAL_CACHE_SIZE_IN_BYTES as README's differences describe
// it, for the model's one-descriptor fixed windows: a denial of a counter
// with nothing left (a denied request charges nothing, so at its limit) is
// held for as many hits or more; a shadow_mode rule's never is. Each
// descriptor is one lookup of envoyproxy's gauges.
type cacheModel struct {
	known                    map[string]uint64 // counter -> the fewest hits its denial holds for
	hits, misses, overwrites uint64
	start                    int64 // Unix second the test began
}

// answers reports whether the cache denies hits on counter.
func (c *cacheModel) answers(counter string, hits uint64, shadow bool) bool {
	if c == nil {
		return false
	}
	if h, ok := c.known[counter]; ok && !shadow && hits >= h {
		c.hits++
		return true
	}
	c.misses++
	return false
}

// learn records the backend's denial of hits on counter; full: nothing
// was left.
func (c *cacheModel) learn(counter string, hits uint64, shadow, full bool) {
	if c == nil || shadow || !full {
		return
	}
	if h, ok := c.known[counter]; ok {
		c.known[counter] = min(h, hits)
		c.overwrites++
		return
	}
	c.known[counter] = hits
}

// mixedRequest spends client cmix, then asks for it with a fresh client in
// one request: the cache holds cmix's denial but not the other's, so Redis
// decides both and confirms the denial the cache knew, which envoyproxy
// counts over_limit_with_local_cache as it counts a local cache hit.
func (m *envoyModel) mixedRequest(t *testing.T, svc *service) {
	t.Helper()
	for i := range 4 {
		want := m.decide("shop.client_cmix", "client/cmix", 3, 1, false)
		resp, err := svc.call(request("shop", desc("client", "cmix")))
		m.calls++
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("cmix #%d: %v %v, want %v", i, resp.GetOverallCode(), err, want)
		}
	}
	resp, err := svc.call(request("shop", desc("client", "cmix"), desc("client", "cfresh")))
	m.calls++
	if err != nil || resp.GetOverallCode() != over {
		t.Fatalf("cmix with cfresh: %v %v, want OVER_LIMIT", resp.GetOverallCode(), err)
	}
	m.cache.hits++
	m.cache.misses++
	m.cache.overwrites++ // Redis denied cmix again
	for _, stat := range []string{"total_hits", "over_limit", "over_limit_with_local_cache"} {
		m.add("shop.client_cmix", stat, 1)
	}
	// cfresh fitted, in a denied request: within_limit, nothing charged.
	m.add("shop.client_cfresh", "total_hits", 1)
	m.add("shop.client_cfresh", "within_limit", 1)
}

// check holds the gauges the binary sent to statsd and serves on
// PROMETHEUS_ADDR to the model; without a cache, none are sent.
func (c *cacheModel) check(t *testing.T, lines *statsdLines, promURL string) {
	t.Helper()
	if c == nil {
		lines.mu.Lock()
		defer lines.mu.Unlock()
		if len(lines.gauges) != 0 {
			t.Errorf("gauges sent without a local cache: %v", lines.gauges)
		}
		return
	}
	want := map[string]uint64{
		"hitCount": c.hits, "missCount": c.misses, "lookupCount": c.hits + c.misses,
		"entryCount": uint64(len(c.known)), "evacuateCount": 0, "expiredCount": 0, "overwriteCount": c.overwrites,
	}
	gauge := func(name string) uint64 {
		lines.mu.Lock()
		defer lines.mu.Unlock()
		return lines.gauges["ratelimit.localcache."+name]
	}
	testkit.WaitFor(t, 10*time.Second, "statsd gauges equal to the model", func() bool {
		for name, v := range want {
			if gauge(name) != v {
				return false
			}
		}
		return true
	})
	end := time.Now().Unix()
	if at := int64(gauge("averageAccessTime")); at < c.start || at > end {
		t.Errorf("statsd averageAccessTime %d, want within the run [%d, %d]", at, c.start, end)
	}
	series := scrapeSeries(t, promURL, "ratelimit_localcache_")
	for name, v := range want {
		if got := series["ratelimit_localcache_"+name]; got != float64(v) {
			t.Errorf("ratelimit_localcache_%s = %v, want %d", name, got, v)
		}
	}
	if at := int64(series["ratelimit_localcache_averageAccessTime"]); at < c.start || at > end {
		t.Errorf("ratelimit_localcache_averageAccessTime %d, want within [%d, %d]", at, c.start, end)
	}
	if len(series) != len(want)+1 {
		t.Errorf("ratelimit_localcache_* series %v, want the eight gauges", series)
	}
	t.Logf("local cache: %d hits, %d misses, %d entries, %d overwrites", c.hits, c.misses, len(c.known), c.overwrites)
}

// scrapeSeries reads every sample whose name starts with prefix.
func scrapeSeries(t *testing.T, url, prefix string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range families {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			id := "{" + strings.Join(labels, ",") + "}"
			if id == "{}" {
				id = ""
			}
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+id] = float64(m.GetHistogram().GetSampleCount())
			case dto.MetricType_COUNTER:
				out[name+id] = m.GetCounter().GetValue()
			default:
				out[name+id] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

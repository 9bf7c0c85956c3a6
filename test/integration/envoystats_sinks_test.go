package integration

import (
	"bufio"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// statsdLines adds up the statsd lines a listener receives.
type statsdLines struct {
	mu       sync.Mutex
	counters map[string]uint64
	timers   map[string]int
	gauges   map[string]uint64 // the last value sent
}

// serve adds up the lines of every connection ln accepts. The test listens
// on TCP (gostats' default): over UDP a loaded box dropped datagrams, and a
// lost counter delta never arrives.
func (s *statsdLines) serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			sc := bufio.NewScanner(conn)
			for sc.Scan() {
				s.add(strings.TrimSpace(sc.Text()))
			}
		}()
	}
}

func (s *statsdLines) add(line string) {
	if line == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name, rest, _ := strings.Cut(line, ":")
	value, kind, _ := strings.Cut(rest, "|")
	switch kind {
	case "c":
		v, _ := strconv.ParseUint(value, 10, 64)
		s.counters[name] += v
	case "ms":
		s.timers[name]++
	case "g":
		v, _ := strconv.ParseUint(value, 10, 64)
		s.gauges[name] = v
	default:
		s.counters["unexpected line "+line]++
	}
}

func (s *statsdLines) snapshot() (map[string]uint64, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(map[string]uint64, len(s.counters))
	for k, v := range s.counters {
		c[k] = v
	}
	ti := make(map[string]int, len(s.timers))
	for k, v := range s.timers {
		ti[k] = v
	}
	return c, ti
}

func equalCounts(a, b map[string]uint64) bool { return diffCounts(a, b) == "" }

func diffCounts(got, want map[string]uint64) string {
	var out []string
	for k, w := range want {
		if got[k] != w {
			out = append(out, k+": got "+strconv.FormatUint(got[k], 10)+", want "+strconv.FormatUint(w, 10))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, k+": got "+strconv.FormatUint(g, 10)+", not in the model")
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// mapDefault is envoyproxy's built-in statsd_exporter mapping of the
// model's names, written from its rules: a key of one segment is {domain,
// key1}, a longer one {domain, key1, key2} with the deeper ones summed;
// other names are unmapped, their own name escaped (but one, see below).
func mapDefault(stats map[string]uint64) map[string]float64 {
	out := map[string]float64{}
	mapped := map[string]bool{"total_hits": true, "over_limit": true, "near_limit": true, "within_limit": true, "shadow_mode": true}
	for name, v := range stats {
		switch {
		case strings.HasPrefix(name, "ratelimit.service.rate_limit."):
			rest := strings.TrimPrefix(name, "ratelimit.service.rate_limit.")
			stat := rest[strings.LastIndex(rest, ".")+1:]
			parts := strings.Split(strings.TrimSuffix(rest, "."+stat), ".")
			if stat == "over_limit_with_local_cache" && len(parts) >= 3 {
				// The mapping's regex for keys of three segments or more is
				// not anchored at its end (statsd_exporter's regexes never
				// are): it takes this name for over_limit, in envoyproxy too.
				stat = "over_limit"
			}
			if !mapped[stat] || len(parts) < 2 {
				out[escape(name)] += float64(v)
				continue
			}
			labels := `domain="` + parts[0] + `",key1="` + parts[1] + `"`
			if len(parts) > 2 {
				labels += `,key2="` + parts[2] + `"`
			}
			out["ratelimit_service_rate_limit_"+stat+"{"+labels+"}"] += float64(v)
		case strings.HasPrefix(name, "ratelimit.service.call.should_rate_limit."):
			out[`ratelimit_service_should_rate_limit_error{err_type="`+strings.TrimPrefix(name, "ratelimit.service.call.should_rate_limit.")+`"}`] += float64(v)
		case strings.HasPrefix(name, "ratelimit_server."):
			method := strings.Split(name, ".")[1]
			out[`ratelimit_service_total_requests{grpc_method="`+method+`"}`] += float64(v)
		default: // config_load_success
			out[escape(name)] += float64(v)
		}
	}
	return out
}

var notMetricChar = regexp.MustCompile(`[^a-zA-Z0-9_]`)

func escape(name string) string { return notMetricChar.ReplaceAllString(name, "_") }

// scrapeEnvoySeries reads every ratelimit_service_* sample: counters and
// gauges by value, histograms by count.
func scrapeEnvoySeries(t *testing.T, url string) map[string]float64 {
	t.Helper()
	return scrapeSeries(t, url, "ratelimit_service_")
}

func diffSeries(got, want map[string]float64) string {
	var out []string
	for k, w := range want {
		if got[k] != w {
			out = append(out, k+": got "+strconv.FormatFloat(got[k], 'g', -1, 64)+", want "+strconv.FormatFloat(w, 'g', -1, 64))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, k+": got "+strconv.FormatFloat(g, 'g', -1, 64)+", not in the model")
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

package envoystats

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
)

// series renders every sample of families named with prefix as
// name{label="value",...} value (histograms as _count and _sum).
func series(t *testing.T, p *Prometheus, prefix string) []string {
	t.Helper()
	families, err := p.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			id := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out = append(out, id+" "+ftoa(m.GetCounter().GetValue()))
			case dto.MetricType_GAUGE:
				out = append(out, id+" "+ftoa(m.GetGauge().GetValue()))
			case dto.MetricType_HISTOGRAM:
				out = append(out, id+" count "+ftoa(float64(m.GetHistogram().GetSampleCount()))+" sum "+ftoa(m.GetHistogram().GetSampleSum()))
			}
		}
	}
	sort.Strings(out)
	return out
}

func ftoa(f float64) string { return strings.TrimRight(strings.TrimRight(strconvFloat(f), "0"), ".") }

// TestPrometheusDefaultMapping: the built-in mapping gives envoyproxy's
// series: a key of one segment {domain, key1}, of two or more {domain,
// key1, key2} with deeper segments adding up; other stats unmapped under
// their own names; the response time in seconds.
func TestPrometheusDefaultMapping(t *testing.T) {
	for _, millis := range []bool{false, true} {
		p, err := NewPrometheus("", millis)
		if err != nil {
			t.Fatal(err)
		}
		s := New(p)
		s.Count(s.Rule("d.one"), Decision{Hits: 3, Limit: 2, Over: true})
		s.Count(s.Rule("d.a_x.b"), Decision{Hits: 1, Limit: 5})
		s.Count(s.Rule("d.a_x.b.c_1"), Decision{Hits: 2, Limit: 5})
		s.Count(s.Rule("d.a_x.b.c_2"), Decision{Hits: 4, Limit: 5, Shadow: true, Over: true, Before: 5})
		s.Count(s.Rule("d.masked_remote_address_10.0.0.0/8"), Decision{Hits: 1, Limit: 5, FromCache: true, Over: true})
		s.ConfigLoad(nil)
		s.RedisError()
		s.DomainNotFound("nope", 1)
		call := s.UnaryServerInterceptor()
		info := &grpc.UnaryServerInfo{FullMethod: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}
		for range 3 {
			if _, err := call(context.Background(), nil, info, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
				t.Fatal(err)
			}
		}
		s.Flush()
		want := []string{
			"ratelimit_service_config_load_success{} 1",
			// Unmapped: the name escaped for Prometheus ('/' too).
			"ratelimit_service_rate_limit_d_masked_remote_address_10_0_0_0_8_over_limit_with_local_cache{} 1",
			// 3 hits against 2, none before: 1 past the limit, 1 between
			// the threshold (floor 1.6) and the limit.
			"ratelimit_service_rate_limit_near_limit{domain=d,key1=one} 1",
			"ratelimit_service_rate_limit_nope_domain_not_found{} 1",
			"ratelimit_service_rate_limit_over_limit{domain=d,key1=a_x,key2=b} 4",
			"ratelimit_service_rate_limit_over_limit{domain=d,key1=masked_remote_address_10_0_0_0/8} 1",
			"ratelimit_service_rate_limit_over_limit{domain=d,key1=one} 1",
			"ratelimit_service_rate_limit_shadow_mode{domain=d,key1=a_x,key2=b} 4",
			"ratelimit_service_rate_limit_total_hits{domain=d,key1=a_x,key2=b} 7",
			"ratelimit_service_rate_limit_total_hits{domain=d,key1=masked_remote_address_10_0_0_0/8} 1",
			"ratelimit_service_rate_limit_total_hits{domain=d,key1=one} 3",
			"ratelimit_service_rate_limit_within_limit{domain=d,key1=a_x,key2=b} 3",
			"ratelimit_service_should_rate_limit_error{err_type=redis_error} 1",
			"ratelimit_service_total_requests{grpc_method=ShouldRateLimit} 3",
		}
		got := series(t, p, "ratelimit_service_")
		var rt string
		for i, g := range got {
			if strings.HasPrefix(g, "ratelimit_service_response_time_seconds{") {
				rt, got = g, append(got[:i:i], got[i+1:]...)
				break
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("millis=%v: series\n%s\nwant\n%s", millis, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if !strings.HasPrefix(rt, "ratelimit_service_response_time_seconds{grpc_method=ShouldRateLimit} count 3 sum ") {
			t.Errorf("response time %q, want 3 observations", rt)
		}
		s.Close()
	}
}

// TestPrometheusResponseTimeUnit: the built-in mapping scales the
// millisecond timer to seconds unless PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS;
// a mapping file is applied as written.
func TestPrometheusResponseTimeUnit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "conf.yaml")
	if err := os.WriteFile(file, []byte(`mappings:
  - match: "ratelimit_server.*.response_time"
    name: "rl_time"
    timer_type: histogram
    labels: {method: "$1"}
  - match: "."
    match_type: regex
    action: drop
    name: dropped
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file   string
		millis bool
		want   string
	}{
		{"", false, "ratelimit_service_response_time_seconds{grpc_method=Check} count 1 sum 1.5"},
		{"", true, "ratelimit_service_response_time_seconds{grpc_method=Check} count 1 sum 1500"},
		{file, false, "rl_time{method=Check} count 1 sum 1500"},
	} {
		p, err := NewPrometheus(tc.file, tc.millis)
		if err != nil {
			t.Fatal(err)
		}
		p.FlushTimer("ratelimit_server.Check.response_time", 1500)
		p.FlushCounter("ratelimit.service.config_load_success", 1) // dropped by the file
		p.Flush()
		got := append(series(t, p, "ratelimit_service_response_time"), series(t, p, "rl_")...)
		if tc.file != "" {
			got = append(got, series(t, p, "ratelimit_service_config")...)
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("file=%q millis=%v: %v, want [%s]", tc.file, tc.millis, got, tc.want)
		}
		p.close()
	}
}

func strconvFloat(f float64) string { return strconv.FormatFloat(f, 'f', 6, 64) }

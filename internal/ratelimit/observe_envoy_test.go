package ratelimit_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/envoystats"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// statSink adds up the counters each flush of envoyproxy's stats sends.
type statSink struct {
	mu sync.Mutex
	c  map[string]uint64
}

func (s *statSink) FlushCounter(name string, v uint64) {
	s.mu.Lock()
	s.c[name] += v
	s.mu.Unlock()
}
func (*statSink) FlushGauge(string, uint64)  {}
func (*statSink) FlushTimer(string, float64) {}

func envoyObserver() (*metrics.Metrics, *envoystats.Stats, *statSink) {
	sink := &statSink{c: map[string]uint64{}}
	es := envoystats.New(sink)
	return metrics.New(metrics.WithEnvoyStats(es)), es, sink
}

// TestServiceFeedsEnvoyStats: what envoyproxy counts per request rather
// than per descriptor: global_shadow_mode when SHADOW_MODE lets an over-limit
// request through (shadow_mode rules and a quota alternative left do not
// count), domain_not_found per descriptor, service_error for requests
// refused before the store, redis_error when the store fails.
func TestServiceFeedsEnvoyStats(t *testing.T) {
	const svc = "ratelimit.service."
	tests := []struct {
		name  string
		opts  []ratelimit.Option
		calls []*rlsv3.RateLimitRequest
		want  map[string]uint64 // the service-wide counters only
	}{
		{"SHADOW_MODE lets an over-limit request through", []ratelimit.Option{ratelimit.WithShadowMode(true)},
			[]*rlsv3.RateLimitRequest{request("test", desc("one", "")), request("test", desc("one", ""))},
			map[string]uint64{"global_shadow_mode": 1}},
		{"a shadow_mode rule over its limit is not counted", []ratelimit.Option{ratelimit.WithShadowMode(true)},
			[]*rlsv3.RateLimitRequest{request("test", desc("shadow", "")), request("test", desc("shadow", ""))},
			map[string]uint64{}},
		{"quota: counted only when every alternative is over", []ratelimit.Option{ratelimit.WithShadowMode(true)},
			[]*rlsv3.RateLimitRequest{
				request("test", desc("q1", "")), request("test", desc("q1", ""), desc("q2", "")),
				request("test", desc("q1", ""), desc("q2", ""))},
			map[string]uint64{"global_shadow_mode": 1}},
		{"without SHADOW_MODE nothing", nil,
			[]*rlsv3.RateLimitRequest{request("test", desc("one", "")), request("test", desc("one", ""))},
			map[string]uint64{}},
		{"unknown domain: once per descriptor", nil,
			[]*rlsv3.RateLimitRequest{request("nope", desc("a", "1"), desc("b", "2"))},
			map[string]uint64{"rate_limit.nope.domain_not_found": 2}},
		{"known domain, no rule: nothing", nil,
			[]*rlsv3.RateLimitRequest{request("test", desc("unknown", "1"))},
			map[string]uint64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, es, sink := envoyObserver()
			f := newFixture(t, testConfig, append(tt.opts, ratelimit.WithObserver(m))...)
			for _, req := range tt.calls {
				f.call(t, req)
			}
			es.Flush()
			got := map[string]uint64{}
			for k, v := range sink.c {
				if k != svc+"config_load_success" && !strings.HasPrefix(k, svc+"rate_limit.test.") {
					got[k[len(svc):]] = v
				}
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("service stats %v, want %v", got, tt.want)
			}
		})
	}

	m, es, sink := envoyObserver()
	refusing := ratelimit.New(staticConfig{parse(t, testConfig)}, nil, ratelimit.WithObserver(m))
	noConfig := ratelimit.New(staticConfig{nil}, nil, ratelimit.WithObserver(m))
	failing := ratelimit.New(staticConfig{parse(t, testConfig)}, &fakeStore{fn: func(context.Context, []store.Request) ([]store.Result, error) {
		return nil, context.DeadlineExceeded
	}}, ratelimit.WithObserver(m))
	for _, c := range []struct {
		svc *ratelimit.Service
		req *rlsv3.RateLimitRequest
	}{
		{refusing, request("", desc("one", ""))}, // no domain
		{refusing, request("test")},              // no descriptors
		{noConfig, request("test", desc("one", ""))},
		{failing, request("test", desc("one", ""))},
	} {
		if _, err := c.svc.ShouldRateLimit(context.Background(), c.req); err == nil {
			t.Fatalf("%v answered, want an error", c.req)
		}
	}
	es.Flush()
	want := map[string]uint64{svc + "call.should_rate_limit.service_error": 3, svc + "call.should_rate_limit.redis_error": 1}
	if !maps.Equal(sink.c, want) {
		t.Errorf("errors %v, want %v", sink.c, want)
	}
}

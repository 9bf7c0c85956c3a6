package service_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/service"
)

// source is a rules watcher reduced to what the Service asks of it.
type source struct{ rules atomic.Pointer[service.Rules] }

func (s *source) Current() *service.Rules { return s.rules.Load() }

// recorder is a program's own Observer: it keeps the hits and counts the
// requests by code.
type recorder struct {
	mu       sync.Mutex
	hits     []service.Hit
	requests map[string]int
}

func (r *recorder) Observe(h service.Hit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits = append(r.hits, h)
}

func (r *recorder) Request(code string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[code]++
}

func (*recorder) Refund(service.Hit)         {}
func (*recorder) StoreError(string)          {}
func (*recorder) StoreErrorAnswer(string)    {}
func (*recorder) ServiceError()              {}
func (*recorder) GlobalShadowMode()          {}
func (*recorder) DomainNotFound(string, int) {}

// TestConfigSourceAndObserver: a config source is read on every request (a
// reload takes effect without SetRules, which it overrides), and a
// program's Observer sees each decision with its rule and descriptor.
func TestConfigSourceAndObserver(t *testing.T) {
	src, rec := &source{}, &recorder{requests: map[string]int{}}
	svc, _ := newService(t, parse(t, "domain: other\n"), service.WithConfigSource(src), service.WithObserver(rec))
	if _, err := svc.ShouldRateLimit(context.Background(), request("a")); err == nil {
		t.Fatal("no rules in the source: answered, want Unavailable")
	}
	src.rules.Store(parse(t, apiYAML))
	if got := decide(t, svc, "a"); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("first hit: %v, want OK", got)
	}
	svc.SetRules(nil) // overridden by the source: changes nothing
	if got := decide(t, svc, "a"); got != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("second hit of a limit of 1: %v, want OVER_LIMIT", got)
	}
	if rec.requests["OK"] != 2 || rec.requests["Unavailable"] != 1 {
		t.Errorf("requests by code %v, want 2 OK (one over the limit) and 1 Unavailable", rec.requests)
	}
	if len(rec.hits) != 2 {
		t.Fatalf("observed %d hits, want 2", len(rec.hits))
	}
	first, second := rec.hits[0], rec.hits[1]
	want := service.Entry{Key: "user", Value: "a"}
	if first.Rule.Domain != "api" || first.Rule.StatKey != "api.user" || first.Rule.Limit.Capacity() != 1 ||
		len(first.Descriptor) != 1 || first.Descriptor[0] != want {
		t.Errorf("first hit %+v, want rule api.user of capacity 1 and descriptor user=a", first)
	}
	if !first.Allowed || !first.Charged || second.Allowed || second.Charged || second.Hits != 1 {
		t.Errorf("hits %+v then %+v, want one admitted and charged, then one denied and not", first, second)
	}
}

// TestCounters: Counters and Inspect resolve a descriptor as
// ShouldRateLimit counts it, with public types.
func TestCounters(t *testing.T) {
	svc, _ := newService(t, parse(t, apiYAML))
	decide(t, svc, "a")
	descs := [][]service.Entry{{{Key: "user", Value: "a"}}, {{Key: "nobody", Value: "x"}}}
	counters, err := svc.Counters("api", descs)
	if err != nil {
		t.Fatal(err)
	}
	if len(counters) != 2 || counters[0].Status != service.Counted || counters[0].Key == "" ||
		counters[0].Rule == nil || counters[0].Rule.StatKey != "api.user" || counters[1].Status != service.NoRule || counters[1].Rule != nil {
		t.Fatalf("Counters = %+v, want user counted and nobody without a rule", counters)
	}
	inspected, err := svc.Inspect(context.Background(), "api", descs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if got := inspected[0]; got.Key != counters[0].Key || got.Decision.Remaining != 0 {
		t.Errorf("Inspect = %+v, want key %q and nothing remaining", got, counters[0].Key)
	}
	// The statuses are the core's, value for value.
	for core, pub := range map[ratelimit.CounterStatus]service.CounterStatus{
		ratelimit.NoRule: service.NoRule, ratelimit.Unlimited: service.Unlimited,
		ratelimit.Replaced: service.Replaced, ratelimit.Counted: service.Counted,
	} {
		if service.CounterStatus(core) != pub {
			t.Errorf("core status %d is public %d", core, pub)
		}
	}
}

// TestDaemonMetrics: the daemon gives WithMetrics the registry of the
// metrics it built, which then observe the Service.
func TestDaemonMetrics(t *testing.T) {
	m := metrics.New()
	svc, _ := newService(t, parse(t, apiYAML), service.WithMetrics(m.Registerer()))
	decide(t, svc, "a")
	decide(t, svc, "a")
	const want = `
# HELP ratelimitd_over_limit_total Hits denied as over the rule's limit (shadow mode included).
# TYPE ratelimitd_over_limit_total counter
ratelimitd_over_limit_total{domain="api",rule="api.user"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "ratelimitd_over_limit_total"); err != nil {
		t.Errorf("the daemon's metrics: %v", err)
	}
}

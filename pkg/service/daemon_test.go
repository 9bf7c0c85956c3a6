package service_test

import (
	"context"
	"sync/atomic"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/service"
)

// source is a config watcher reduced to what the Service asks of it.
type source struct{ cfg atomic.Pointer[config.Config] }

func (s *source) Current() *config.Config { return s.cfg.Load() }

func parseConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "api.yaml", Data: []byte(yaml)}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDaemonHooks: the options the daemon builds its Service with. A
// config source is read on every request (a reload takes effect without
// SetRules, which it overrides); the observer sees every request; Counters
// and Inspect resolve a descriptor as ShouldRateLimit counts it.
func TestDaemonHooks(t *testing.T) {
	src := &source{}
	m := metrics.New()
	svc, _ := newService(t, parse(t, "domain: other\n"), service.WithConfigSource(src), service.WithObserver(m))
	if _, err := svc.ShouldRateLimit(context.Background(), request("a")); err == nil {
		t.Fatal("no config in the source: answered, want Unavailable")
	}
	src.cfg.Store(parseConfig(t, apiYAML))
	if got := decide(t, svc, "a"); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("first hit: %v, want OK", got)
	}
	svc.SetRules(nil) // overridden by the source: changes nothing
	if got := decide(t, svc, "a"); got != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("second hit of a limit of 1: %v, want OVER_LIMIT", got)
	}
	if n := testutil.CollectAndCount(m.Registry(), "ratelimitd_over_limit_total"); n == 0 {
		t.Error("the observer saw no over-limit hit")
	}

	entries := [][]config.Entry{{{Key: "user", Value: "a"}}, {{Key: "nobody", Value: "x"}}}
	counters, err := svc.Counters("api", entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(counters) != 2 || counters[0].Status != ratelimit.Counted || counters[0].Key == "" || counters[1].Status != ratelimit.NoRule {
		t.Fatalf("Counters = %+v, want user counted and nobody without a rule", counters)
	}
	inspected, err := svc.Inspect(context.Background(), "api", entries[:1])
	if err != nil {
		t.Fatal(err)
	}
	if got := inspected[0]; got.Key != counters[0].Key || got.Decision.Remaining != 0 {
		t.Errorf("Inspect = %+v, want key %q and nothing remaining", got, counters[0].Key)
	}
}

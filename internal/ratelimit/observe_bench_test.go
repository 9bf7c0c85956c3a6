package ratelimit_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/envoystats"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// BenchmarkShouldRateLimitMetrics is BenchmarkShouldRateLimit with the
// Prometheus observer attached, so the two names side by side give the
// cost of metrics on the hot path. "detailed" puts the request's value into
// the rule label; "overflow" sends more distinct values than the cap, the
// path an attacker drives. "+envoy" also counts envoyproxy's stats, sent to
// Prometheus through the statsd mapping and to a statsd socket over UDP
// (the gRPC interceptor's per-call timing is BenchmarkInterceptor in
// internal/envoystats). None allocates more than the bare service.
func BenchmarkShouldRateLimitMetrics(b *testing.B) {
	const yaml = `
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 4294967295}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 4294967295}
`
	cfg := parse(b, yaml)
	for _, c := range []struct {
		name, key string
		n         int
		maxSeries int
		envoy     bool
	}{
		{"plain/descriptors=1", "user", 1, metrics.DefaultDetailedSeries, false},
		{"plain/descriptors=8", "user", 8, metrics.DefaultDetailedSeries, false},
		{"detailed/descriptors=8", "detailed", 8, metrics.DefaultDetailedSeries, false},
		{"overflow/descriptors=8", "detailed", 8, 4, false},
		{"plain+envoy/descriptors=1", "user", 1, metrics.DefaultDetailedSeries, true},
		{"plain+envoy/descriptors=8", "user", 8, metrics.DefaultDetailedSeries, true},
		{"detailed+envoy/descriptors=8", "detailed", 8, metrics.DefaultDetailedSeries, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			st := memstore.New()
			defer st.Close()
			opts := []metrics.Option{metrics.WithMaxDetailedSeries(c.maxSeries)}
			if c.envoy {
				es := benchEnvoyStats(b)
				opts = append(opts, metrics.WithEnvoyStats(es))
			}
			m := metrics.New(opts...)
			svc := ratelimit.New(staticConfig{cfg}, st, ratelimit.WithObserver(m))
			req := request("bench")
			for i := range c.n {
				req.Descriptors = append(req.Descriptors, desc(c.key, fmt.Sprint(i)))
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := svc.ShouldRateLimit(ctx, req)
				if err != nil || resp.GetOverallCode() != OK {
					b.Fatalf("ShouldRateLimit = %v, %v", resp, err)
				}
			}
		})
	}
}

// benchEnvoyStats sends envoyproxy's stats to Prometheus and to a UDP
// socket that reads nothing, flushed every 10ms so that flushes are part of
// the measured cost.
func benchEnvoyStats(b *testing.B) *envoystats.Stats {
	b.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	statsd, err := envoystats.NewStatsd("127.0.0.1", conn.LocalAddr().(*net.UDPAddr).Port, "udp", zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	prom, err := envoystats.NewPrometheus("", false)
	if err != nil {
		b.Fatal(err)
	}
	es := envoystats.New(envoystats.Fanout(prom, statsd), envoystats.WithFlushInterval(10*time.Millisecond))
	es.Start()
	b.Cleanup(es.Close)
	return es
}

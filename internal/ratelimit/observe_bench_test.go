package ratelimit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// BenchmarkShouldRateLimitMetrics is BenchmarkShouldRateLimit with the
// Prometheus observer attached, so the two names side by side give the
// cost of metrics on the hot path. "detailed" puts the request's value into
// the rule label (a string built per descriptor); "overflow" sends more
// distinct values than the cap, the path an attacker drives.
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
	}{
		{"plain/descriptors=1", "user", 1, metrics.DefaultDetailedSeries},
		{"plain/descriptors=8", "user", 8, metrics.DefaultDetailedSeries},
		{"detailed/descriptors=8", "detailed", 8, metrics.DefaultDetailedSeries},
		{"overflow/descriptors=8", "detailed", 8, 4},
	} {
		b.Run(c.name, func(b *testing.B) {
			st := memstore.New()
			defer st.Close()
			m := metrics.New(metrics.WithMaxDetailedSeries(c.maxSeries))
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

package metrics_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/envoystats"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
)

// BenchmarkObserve is one descriptor's counting: ratelimitd's counters
// alone, and with envoyproxy's stats too (a recording sink: what a decision
// costs, not what sending costs).
func BenchmarkObserve(b *testing.B) {
	cfg := parseRules(b, envoyRules)
	user := []config.Entry{{Key: "user", Value: "bob"}}
	for _, c := range []struct {
		name  string
		envoy bool
		hit   metrics.Hit
	}{
		{"plain", false, metrics.Hit{Rule: cfg.Match("d", []config.Entry{{Key: "plain", Value: "x"}}), Hits: 1, Allowed: true, Charged: true, Capacity: 10, Remaining: 5}},
		{"plain+envoy", true, metrics.Hit{Rule: cfg.Match("d", []config.Entry{{Key: "plain", Value: "x"}}), Hits: 1, Allowed: true, Charged: true, Capacity: 10, Remaining: 5}},
		{"detailed", false, metrics.Hit{Rule: cfg.Match("d", user), Entries: user, Hits: 1, Allowed: true, Charged: true, Capacity: 10, Remaining: 5}},
		{"detailed+envoy", true, metrics.Hit{Rule: cfg.Match("d", user), Entries: user, Hits: 1, Allowed: true, Charged: true, Capacity: 10, Remaining: 5}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var opts []metrics.Option
			if c.envoy {
				opts = append(opts, metrics.WithEnvoyStats(envoystats.New(&counterSink{c: map[string]uint64{}})))
			}
			m := metrics.New(opts...)
			b.ReportAllocs()
			for b.Loop() {
				m.Observe(c.hit)
			}
		})
	}
}

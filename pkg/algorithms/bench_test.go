package algorithms

import (
	"testing"
	"time"
)

// BenchmarkTake measures the Go reference (the embedded store's cost per
// descriptor): a hit every 10µs on a 1000/s limit, committing like TakeAll.
func BenchmarkTake(b *testing.B) {
	for _, alg := range All() {
		b.Run(alg.String(), func(b *testing.B) {
			lim := Limit{Algorithm: alg, Requests: 1000, Period: time.Second}
			if alg.Info().Bucket {
				lim.Burst = 100
			}
			var st State
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(10 * time.Microsecond)
				d, next := Take(lim, st, 1, now)
				if d.Allowed {
					st = next
				}
			}
		})
	}
}

package scripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// BenchmarkRunnerTake is one EVALSHA round trip to a local redis-server per
// op (Redis TIME clock), for one op and for a batch of 4 keys.
func BenchmarkRunnerTake(b *testing.B) {
	ctx := context.Background()
	rdb := newRedis(b)
	r := scripts.NewRunner()
	for _, alg := range algorithms.All() {
		for _, n := range []int{1, 4} {
			name := alg.String()
			if n > 1 {
				name += "/batch4"
			}
			b.Run(name, func(b *testing.B) {
				lim := algorithms.Limit{Algorithm: alg, Requests: 1e6, Period: time.Second}
				ops := make([]algorithms.Op, n)
				for i := range ops {
					ops[i] = algorithms.Op{Key: name + string(rune('a'+i)), Limit: lim, Hits: 1}
				}
				for b.Loop() {
					if _, err := r.Take(ctx, rdb, ops, time.Time{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

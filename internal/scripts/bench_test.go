package scripts_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// BenchmarkRunnerTake is one EVALSHA round trip to a local redis-server per
// op (Redis TIME clock), for one op and for a batch of 4 keys. redis-µs/call
// is Redis's own CPU per script call (INFO commandstats usec_per_call).
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
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := r.Take(ctx, rdb, ops, time.Time{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(redisMicrosPerCall(b, rdb), "redis-µs/call")
			})
		}
	}
}

// redisMicrosPerCall reads usec_per_call of EVALSHA (or EVAL) since the last
// CONFIG RESETSTAT.
func redisMicrosPerCall(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_evalsha:")), ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				return x
			}
		}
	}
	return 0
}

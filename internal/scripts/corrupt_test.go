package scripts_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// TestCorruptedStateHeals: whatever a hand edit leaves in a counter's key
// (text, fractions, infinities, absurd or negative numbers, times years
// ahead, no TTL; as a packed string, a log, or a key of another type), a
// take answers as for an absent key, without error, and overwrites it with
// a TTL within twice the rule's horizon.
func TestCorruptedStateHeals(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	r := scripts.NewRunner()
	now := time.UnixMicro(1_700_000_000_000_000)
	year := int64(365 * 24 * time.Hour / time.Microsecond)
	strs := []string{
		"garbage",
		scripts.PackRegisters(algorithms.State{})[:31],
		packFloats(math.NaN(), 1, 0, math.Inf(1)),
		packFloats(1.5, 2.5, 0, float64(now.UnixMicro()+1000)),
		packFloats(1e300, -1e300, 0, 1e300),
		packFloats(1<<60, 1<<60, 0, float64(now.UnixMicro()+10*year)),
		scripts.PackRegisters(scripts.FromRegisters(0, now.UnixMicro()+10*year, 1, 0, now.UnixMicro()+10*year)),
		scripts.PackRegisters(scripts.FromRegisters(0, -1<<50, 1<<50, -5, now.UnixMicro()+10*year)),
	}
	for _, alg := range algorithms.All() {
		lim := algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Minute}
		want, fresh := algorithms.Take(lim, algorithms.State{}, 1, now)
		// Read as absent, a corrupt key is written as a fresh one is.
		freshTTL := time.Duration(fresh.ExpiresAt-now.UnixMicro()) * time.Microsecond
		corrupt := make([]func(key string) error, 0, len(strs)+4)
		// Keys of another type: GET and ZRANGE answer WRONGTYPE, which must
		// read as absent, not fail the take.
		corrupt = append(corrupt,
			func(key string) error {
				return rdb.HSet(ctx, key, "a", now.UnixMicro(), "b", 10, "c", 0, "e", now.UnixMicro()+10*year).Err()
			},
			func(key string) error { return rdb.RPush(ctx, key, "garbage").Err() })
		for _, v := range strs {
			corrupt = append(corrupt, func(key string) error { return rdb.Set(ctx, key, v, 0).Err() })
		}
		corrupt = append(corrupt,
			func(key string) error {
				return rdb.ZAdd(ctx, key, redisZ(now.UnixMicro(), "garbage"), redisZ(float64(now.UnixMicro()+10*year), "~3")).Err()
			},
			func(key string) error {
				return rdb.ZAdd(ctx, key, redisZ(now.UnixMicro(), fmt.Sprintf("%d:1:1", now.UnixMicro())), redisZ(1e300, "~1")).Err()
			})
		for i, c := range corrupt {
			key := fmt.Sprintf("corrupt:%s:%d", alg, i)
			if err := c(key); err != nil {
				t.Fatal(err)
			}
			got, err := takeDecisions(r.Take(ctx, rdb, []algorithms.Op{{Key: key, Limit: lim, Hits: 1}}, now))
			if err != nil {
				t.Fatalf("%s corruption %d: %v", alg, i, err)
			}
			if got[0] != want {
				t.Errorf("%s corruption %d: %s, want %s as for an absent key", alg, i, fmtDecision(got[0]), fmtDecision(want))
			}
			if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > freshTTL+time.Millisecond {
				t.Errorf("%s corruption %d: TTL %s after the take, want 1ms..%s", alg, i, ttl, freshTTL)
			}
		}
	}
}

func redisZ[T int64 | float64](score T, member string) redis.Z {
	return redis.Z{Score: float64(score), Member: member}
}

// packFloats is a register state's 32 bytes holding any four binary64
// values, which PackRegisters (integers only) cannot write.
func packFloats(a, b, c, e float64) string {
	buf := make([]byte, 0, 32)
	for _, f := range []float64{a, b, c, e} {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(f))
	}
	return string(buf)
}

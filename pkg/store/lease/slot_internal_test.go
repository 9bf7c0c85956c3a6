package lease

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// firstLive against the definition in big integers, over the whole range
// of limits Validate allows (products far past 64 bits): slot k is live at
// now iff now <= end - ceil((size-k)*P/R) - 1µs.
func TestFirstLive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	live := func(l *lease, k uint64, now int64) bool {
		x := new(big.Int).Mul(new(big.Int).SetUint64(l.size-k), big.NewInt(l.limit.Period.Microseconds()))
		r := new(big.Int).SetUint64(l.limit.Requests)
		x.Add(x, new(big.Int).Sub(r, big.NewInt(1))).Quo(x, r)
		deadline := new(big.Int).Sub(big.NewInt(l.deadline), x)
		deadline.Sub(deadline, big.NewInt(1))
		return big.NewInt(now).Cmp(deadline) <= 0
	}
	mid := 0
	for range 20000 {
		period := time.Duration(1+rng.Int64N(int64(algorithms.MaxPeriod/time.Microsecond))) * time.Microsecond
		if rng.IntN(2) == 0 {
			period = time.Duration(1+rng.Int64N(3600_000_000)) * time.Microsecond
		}
		l := lease{
			kind:     bucket,
			limit:    algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 1 + rng.Uint64N(algorithms.MaxCount), Period: period},
			size:     2 + rng.Uint64N(1<<uint(1+rng.IntN(40))),
			deadline: 1<<51 + rng.Int64N(1<<40),
		}
		if rng.IntN(2) == 0 {
			l.limit.Requests = 1 + rng.Uint64N(10000)
		}
		// now around some slot's deadline.
		k := rng.Uint64N(l.size)
		span := new(big.Int).Mul(new(big.Int).SetUint64(l.size-k), big.NewInt(period.Microseconds()))
		span.Quo(span, new(big.Int).SetUint64(l.limit.Requests))
		now := l.deadline - 1 + rng.Int64N(5) - 2
		if span.IsInt64() && span.Int64() < 1<<52 {
			now -= span.Int64()
		}
		f := l.firstLive(now)
		if f > 0 && f < l.size {
			mid++
		}
		if f > l.size || (f < l.size && !live(&l, f, now)) || (f > 0 && live(&l, f-1, now)) {
			t.Fatalf("firstLive(%d) = %d for %+v", now, f, l)
		}
	}
	if mid < 5000 {
		t.Fatalf("only %d draws between the first and the last slot", mid)
	}
}

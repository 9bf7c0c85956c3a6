package scripts_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func TestPackRegisters(t *testing.T) {
	for _, st := range []algorithms.State{
		{},
		algorithms.FromRegisters(1_700_000_000_000_000, 5, 999_999, 1_700_000_001_000_000),
		algorithms.FromRegisters(-1<<53, 1<<53, -1, 0),
	} {
		v := scripts.PackRegisters(st)
		got, ok := scripts.UnpackRegisters(v)
		if !ok || len(v) != 32 || got.ExpiresAt != st.ExpiresAt {
			t.Errorf("%+v packed to %d bytes, read back %+v ok=%v", st, len(v), got, ok)
		}
		ga, gb, gc := got.Registers()
		a, b, c := st.Registers()
		if ga != a || gb != b || gc != c {
			t.Errorf("%+v read back as %+v", st, got)
		}
	}
	for name, v := range map[string]string{
		"short":      scripts.PackRegisters(algorithms.State{})[:31],
		"long":       scripts.PackRegisters(algorithms.State{}) + "x",
		"NaN":        packFloats(math.NaN(), 0, 0, 0),
		"infinity":   packFloats(0, math.Inf(-1), 0, 0),
		"fraction":   packFloats(0, 0, 0.5, 0),
		"past 2^53":  packFloats(0, 0, 0, 1<<54),
		"empty":      "",
		"hash-ish":   "a1b2c3e4",
		"decimal 32": "12345678901234567890123456789012",
	} {
		if st, ok := scripts.UnpackRegisters(v); ok {
			t.Errorf("%s: read as %+v, want rejected as the scripts reject it", name, st)
		}
	}
}

// TestHashLayoutUpgrade: a counter that an older release stored as a hash
// {a, b, c, e} keeps counting after the upgrade to the packed string, for
// every register algorithm, and its first write turns it into the string
// with a TTL.
func TestHashLayoutUpgrade(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	r := scripts.NewRunner()
	now := time.UnixMicro(1_700_000_000_000_000)
	for _, alg := range algorithms.All() {
		if alg.Family() != algorithms.Registers {
			continue
		}
		lim := algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Minute}
		_, st := algorithms.Take(lim, algorithms.State{}, 7, now)
		key := "upgrade:" + alg.String()
		a, b, c := st.Registers()
		if err := rdb.HSet(ctx, key, "a", a, "b", b, "c", c, "e", st.ExpiresAt).Err(); err != nil {
			t.Fatal(err)
		}
		later := now.Add(time.Second)
		want, wantSt := algorithms.Take(lim, st, 2, later)
		got, err := r.Take(ctx, rdb, []algorithms.Op{{Key: key, Limit: lim, Hits: 2}}, later)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != want {
			t.Errorf("%s: %s over the old hash, want %s as over its state", alg, fmtDecision(got[0]), fmtDecision(want))
		}
		if typ := rdb.Type(ctx, key).Val(); typ != "string" {
			t.Errorf("%s: key is a %s after the write, want a string", alg, typ)
		}
		if stored, ok := scripts.UnpackRegisters(rdb.Get(ctx, key).Val()); !ok || !sameRegisters(stored, wantSt) {
			t.Errorf("%s: stored %+v, want %+v", alg, stored, wantSt)
		}
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 {
			t.Errorf("%s: PTTL %s after the write", alg, ttl)
		}
	}
}

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
		scripts.FromRegisters(0, 1_700_000_000_000_000, 5, 999_999, 1_700_000_001_000_000),
		scripts.FromRegisters(0, -1<<53, 1<<53, -1, 0),
	} {
		v := scripts.PackRegisters(st)
		got, ok := scripts.UnpackRegisters(0, v)
		if !ok || len(v) != 32 || got.ExpiresAt != st.ExpiresAt {
			t.Errorf("%+v packed to %d bytes, read back %+v ok=%v", st, len(v), got, ok)
		}
		ga, gb, gc := scripts.Registers(got)
		a, b, c := scripts.Registers(st)
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
		"field list": "a1b2c3e4",
		"decimal 32": "12345678901234567890123456789012",
	} {
		if st, ok := scripts.UnpackRegisters(0, v); ok {
			t.Errorf("%s: read as %+v, want rejected as the scripts reject it", name, st)
		}
	}
}

// TestOtherTypeReadsFresh: a register key holding another Redis type (no
// release ever stored registers as anything but the string, so a hash
// {a, b, c, e} is as foreign as a list) reads as fresh, not as its fields
// and not as a WRONGTYPE error, and the charge replaces it with the string
// and a TTL, for every register algorithm.
func TestOtherTypeReadsFresh(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	r := scripts.NewRunner()
	now := time.UnixMicro(1_700_000_000_000_000)
	for _, alg := range algorithms.All() {
		if info := alg.Info(); info.Log || info.Counter {
			continue
		}
		lim := algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Minute}
		// A live state that would deny the next take if it were read.
		_, live := algorithms.Take(lim, algorithms.State{}, 10, now)
		a, b, c := scripts.Registers(live)
		writers := map[string]func(key string) error{
			"hash {a, b, c, e}": func(key string) error {
				return rdb.HSet(ctx, key, "a", a, "b", b, "c", c, "e", live.ExpiresAt).Err()
			},
			"list": func(key string) error { return rdb.RPush(ctx, key, scripts.PackRegisters(live)).Err() },
		}
		later := now.Add(time.Second)
		want, wantSt := algorithms.Take(lim, algorithms.State{}, 2, later)
		for name, write := range writers {
			key := "other-type:" + alg.String() + ":" + name
			if err := write(key); err != nil {
				t.Fatal(err)
			}
			got, err := takeDecisions(r.Take(ctx, rdb, []algorithms.Op{{Key: key, Limit: lim, Hits: 2}}, later))
			if err != nil {
				t.Fatalf("%s over a %s: %v", alg, name, err)
			}
			if got[0] != want {
				t.Errorf("%s over a %s: %s, want %s as for an absent key", alg, name, fmtDecision(got[0]), fmtDecision(want))
			}
			if typ := rdb.Type(ctx, key).Val(); typ != "string" {
				t.Errorf("%s over a %s: key is a %s after the write, want a string", alg, name, typ)
			}
			if stored, ok := scripts.UnpackRegisters(alg, rdb.Get(ctx, key).Val()); !ok || !sameRegisters(stored, wantSt) {
				t.Errorf("%s over a %s: stored %+v, want %+v", alg, name, stored, wantSt)
			}
			if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 {
				t.Errorf("%s over a %s: PTTL %s after the write", alg, name, ttl)
			}
		}
	}
}

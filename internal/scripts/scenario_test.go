package scripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// agree runs ops through the real script and through the Go model and fails
// on any difference in decisions or in the stored state of the ops' keys.
func agree(t *testing.T, rdb *redis.Client, m model, ops []algorithms.Op, now time.Time) []algorithms.Decision {
	t.Helper()
	ctx := context.Background()
	out, err := scripts.NewRunner().Take(ctx, rdb, ops, now)
	if err != nil {
		t.Fatal(err)
	}
	got, want := out.Decisions, m.take(ops, now)
	for i := range ops {
		if got[i] != want.Decisions[i] || out.Applied[i] != want.Applied[i] {
			t.Fatalf("op %d (%s, %d hits): lua %s applied %d, go %s applied %d", i, ops[i].Key, ops[i].Hits, fmtDecision(got[i]), out.Applied[i], fmtDecision(want.Decisions[i]), want.Applied[i])
		}
	}
	pipe := rdb.Pipeline()
	reads := map[string]*stateRead{}
	for _, op := range ops {
		reads[op.Key] = queueRead(ctx, pipe, op.Key)
	}
	_, _ = pipe.Exec(ctx)
	for key, r := range reads {
		if err := sameState(m[key], r.result(), now.UnixMicro()); err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
	}
	return got
}

func TestScenarios(t *testing.T) {
	rdb := newRedis(t)
	base := time.Now().Truncate(time.Hour)
	log := algorithms.Limit{Algorithm: algorithms.SlidingLog, Requests: 1000, Period: time.Hour}

	t.Run("a long sliding log pages through its oldest entries", func(t *testing.T) {
		m := model{}
		for i := range 300 {
			agree(t, rdb, m, []algorithms.Op{{Key: "long", Limit: log, Hits: 1}}, base.Add(time.Duration(i)*time.Millisecond))
		}
		now := base.Add(time.Second)
		// Each denial walks a different number of the 300 entries (64 a page).
		for _, hits := range []uint64{701, 764, 765, 766, 829, 830, 1000, 1001, 0} {
			d := agree(t, rdb, m, []algorithms.Op{{Key: "long", Limit: log, Hits: hits}}, now)
			if hits > 700 && d[0].Allowed {
				t.Fatalf("%d hits allowed over 300 logged", hits)
			}
		}
		agree(t, rdb, m, []algorithms.Op{{Key: "long", Limit: log, Hits: 700}}, now)
	})

	t.Run("the clock goes back under a batch that adds entries", func(t *testing.T) {
		m := model{}
		lim := algorithms.Limit{Algorithm: algorithms.SlidingLog, Requests: 10, Period: time.Hour}
		agree(t, rdb, m, []algorithms.Op{{Key: "back", Limit: lim, Hits: 3}}, base.Add(10*time.Second))
		agree(t, rdb, m, []algorithms.Op{{Key: "back", Limit: lim, Hits: 2}}, base.Add(5*time.Second))
		for _, hits := range []uint64{1, 4, 5, 6, 8} {
			agree(t, rdb, m, []algorithms.Op{
				{Key: "back", Limit: lim, Hits: 2},
				{Key: "back", Limit: lim, Hits: hits},
			}, base)
		}
		agree(t, rdb, m, []algorithms.Op{{Key: "back", Limit: lim, Hits: 2}, {Key: "back", Limit: lim, Hits: 2}}, base)
	})

	t.Run("a key changes algorithm family", func(t *testing.T) {
		m := model{}
		now := base
		// Every algorithm after every other, so the key goes from each
		// family to each other one (and stays in one, between two of it).
		var algs []algorithms.Algorithm
		for _, a := range algorithms.All() {
			for _, b := range algorithms.All() {
				algs = append(algs, a, b)
			}
		}
		for i, alg := range algs {
			lim := algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Minute}
			// other is of another family than alg: the first one there is.
			other := lim
			for _, a := range algorithms.All() {
				if ai, bi := a.Info(), alg.Info(); ai.Log != bi.Log || ai.Counter != bi.Counter {
					other.Algorithm = a
					break
				}
			}
			now = now.Add(time.Second)
			agree(t, rdb, m, []algorithms.Op{{Key: "family", Limit: lim, Hits: 2}}, now)
			// Within one batch too, and a denial after a switch.
			agree(t, rdb, m, []algorithms.Op{
				{Key: "family", Limit: lim, Hits: 1},
				{Key: "family", Limit: other, Hits: 1},
				{Key: "family", Limit: lim, Hits: uint64(i % 7)},
			}, now)
		}
	})

	t.Run("unreadable state is fresh", func(t *testing.T) {
		ctx := context.Background()
		lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Period: time.Minute}
		rdb.HSet(ctx, "corrupt", "a", "x", "b", "1", "c", "0", "e", "99999999999999999")
		rdb.ZAdd(ctx, "corrupt-log", redis.Z{Score: 1, Member: "garbage"})
		agree(t, rdb, model{}, []algorithms.Op{{Key: "corrupt", Limit: lim, Hits: 5}}, base)
		lim.Algorithm = algorithms.SlidingLog
		agree(t, rdb, model{}, []algorithms.Op{{Key: "corrupt-log", Limit: lim, Hits: 5}}, base)
	})
}

// TestSettledState: a batch that leaves a charged key at rest (ExpiresAt at
// now: here an empty meter or a full bucket, after a check under another
// limit) writes it alike in Go and Lua, whichever op read it last, so a
// clock that goes back reads the same state on both. An op with an invalid
// limit reads the state through Take in Go, which drops it as expired;
// take.lua's denied batch skips that op, and so kept the at-rest form.
// Through the recording script: a real TTL of 1 ms could drop the key
// before the clock goes back.
func TestSettledState(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	src, ok := scripts.RecordingSource()
	if !ok {
		t.Fatal("RecordingSource no longer matches the script")
	}
	hash, err := rdb.ScriptLoad(ctx, src).Result()
	if err != nil {
		t.Fatal(err)
	}
	take := func(t *testing.T, m model, ops []algorithms.Op, now int64) {
		t.Helper()
		keys, args, err := scripts.Encode(ops, time.UnixMicro(now))
		if err != nil {
			t.Fatal(err)
		}
		reply, err := rdb.EvalSha(ctx, hash, keys, args...).Result()
		if err != nil {
			t.Fatal(err)
		}
		out, err := scripts.Decode(reply.([]any)[0], ops, false, false)
		if err != nil {
			t.Fatal(err)
		}
		got, want := out.Decisions, m.take(ops, time.UnixMicro(now))
		for i := range ops {
			if got[i] != want.Decisions[i] || out.Applied[i] != want.Applied[i] {
				t.Fatalf("t=%d op %d: lua %s applied %d, go %s applied %d", now, i, fmtDecision(got[i]), out.Applied[i], fmtDecision(want.Decisions[i]), want.Applied[i])
			}
		}
		pipe := rdb.Pipeline()
		r := queueRead(ctx, pipe, ops[0].Key)
		_, _ = pipe.Exec(ctx)
		if err := sameState(m[ops[0].Key], r.result(), now); err != nil {
			t.Fatalf("t=%d: %v", now, err)
		}
	}
	tb := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 3, Period: time.Second}
	low := tb
	low.Burst = 1
	log := algorithms.Limit{Algorithm: algorithms.SlidingLog, Requests: 3, Period: time.Second}
	lb := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 2, Period: time.Second, Burst: 3}
	invalid := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 2} // no period: denies the batch
	const now = int64(1_700_000_000_000_000)
	for _, c := range []struct {
		name         string
		charge, rest algorithms.Limit // rest: a check that leaves the key at rest
		deny         bool
	}{
		{"another family, admitted", log, lb, false},
		{"another family, denied", log, lb, true},
		{"a lower capacity, admitted", tb, low, false},
		{"a lower capacity, denied", tb, low, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "settled:" + c.name
			ops := []algorithms.Op{{Key: key, Limit: c.charge, Hits: 1, Usage: true}, {Key: key, Limit: c.rest, Usage: true}}
			if c.deny {
				ops = append(ops, algorithms.Op{Key: key, Limit: invalid, Usage: true})
			}
			m := model{}
			take(t, m, ops, now)
			for _, lim := range []algorithms.Limit{c.charge, c.rest} {
				take(t, m, []algorithms.Op{{Key: key, Limit: lim}}, now-4)
			}
		})
	}
}

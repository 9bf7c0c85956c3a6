package scripts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

const undoTrials = 150 // per algorithm

// TestUndoLua runs the undo property test against the Lua on a real
// redis-server, for every algorithm: charge (one op, or two on the same
// key), let time pass while other requests hit the key (or not), undo, and
// check that (1) the take script reported exactly the charge the Go
// reference made, (2) the undo script left exactly the state algorithms.Undo
// computes, and (3) a check on the undone key never offers more room than
// on a key never charged but hit by the same admitted requests, and exactly
// as much while nothing else hit the key.
func TestUndoLua(t *testing.T) {
	rdb := newRedis(t)
	src, ok := scripts.RecordingSource()
	if !ok {
		t.Fatal("RecordingSource no longer matches the script")
	}
	ctx := context.Background()
	take, err := rdb.ScriptLoad(ctx, src).Result()
	if err != nil {
		t.Fatal(err)
	}
	undo, err := rdb.ScriptLoad(ctx, scripts.UndoSource()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			u := &undoRun{t: t, rdb: rdb, takeSHA: take, undoSHA: undo}
			rng := newRand(t)
			quiet, undone := 0, 0
			for trial := range undoTrials {
				if did, wasQuiet := u.trial(rng, alg, trial); did {
					undone++
					if wasQuiet {
						quiet++
					}
				}
			}
			t.Logf("%d undos, %d quiet", undone, quiet)
			if undone < undoTrials/4 || quiet < undoTrials/20 {
				t.Errorf("only %d undos (%d quiet) were exercised", undone, quiet)
			}
		})
	}
}

// trial is one trial of TestUndoLua on alg: a few takes, the charge, its
// check, then the undo and its checks. It reports whether a charge was
// undone, and whether nothing hit the key between the charge and the undo.
func (u *undoRun) trial(rng *rand.Rand, alg algorithms.Algorithm, trial int) (undone, quiet bool) {
	key := fmt.Sprintf("undo:%s:%d", alg, trial)
	lim := randomLimit(rng, alg)
	now := 1_700_000_000_000_000 + rng.Int64N(1e12)
	m := model{}
	for range rng.IntN(5) {
		now += forward(rng, lim, now)
		u.take(m, []algorithms.Op{{Key: key, Limit: lim, Hits: randomHits(rng, lim)}}, now)
	}
	now += forward(rng, lim, now)
	ops := undoBatch(rng, key, lim)
	before := m[key]
	before.Log = slices.Clone(before.Log)
	ds, charges := u.take(m, ops, now) // the charges are Go's (take)
	if !ds[0].Allowed || (len(ops) >= 2 && !ds[1].Allowed && !ops[1].Usage) || len(charges) == 0 {
		return false, false
	}
	if len(charges) != 1 || charges[0].Key != key || charges[0].Limit != lim {
		u.t.Fatalf("trial %d: take reported charges %+v, want one of %s", trial, charges, key)
	}
	// What the key holds had the batch been denied: its usage alone.
	deny := algorithms.Op{Key: key + ":deny", Hits: 1} // an invalid limit
	den := algorithms.TakeAll(append(slices.Clone(ops), deny), func(string) algorithms.State {
		st := before
		st.Log = slices.Clone(st.Log)
		return st
	}, time.UnixMicro(now))
	if st, ok := den.Writes[key]; ok {
		before = st
	}
	return true, u.undoAndCheck(rng, trial, m, before, charges, now)
}

// undoBatch is the charge of a trial on key: one op, or two on the key,
// and sometimes usage. Usage on another key (in shadow mode, so that it
// never denies the batch) is recorded and never charged; on the key itself
// it is recorded whatever an undo takes back.
func undoBatch(rng *rand.Rand, key string, lim algorithms.Limit) []algorithms.Op {
	ops := []algorithms.Op{{Key: key, Limit: lim, Hits: 1 + rng.Uint64N(min(lim.Capacity(), 5)+1)}}
	if rng.IntN(4) == 0 {
		ops = append(ops, algorithms.Op{Key: key, Limit: lim, Hits: 1})
	}
	usage := algorithms.Op{Key: key + ":usage", Limit: lim, Hits: 1 + rng.Uint64N(3*lim.Capacity()+1), Usage: true, Mode: algorithms.Shadow}
	switch rng.IntN(6) {
	case 0:
		ops = append(ops, usage)
	case 1:
		usage.Key = key
		ops = append(ops, usage)
	}
	return ops
}

// undoAndCheck lets time pass, with other requests hitting the key or
// (quiet) not, undoes charges[0] in Lua and in Go, requires the same state,
// then checks the undone key against one never charged (before: as the
// batch denied left it, hit by the same admitted requests). It reports
// whether the trial was quiet.
func (u *undoRun) undoAndCheck(rng *rand.Rand, trial int, m model, before algorithms.State, charges []scripts.Charge, now int64) bool {
	t, key, lim := u.t, charges[0].Key, charges[0].Limit
	never := model{key: before}
	isQuiet := rng.IntN(3) == 0
	for range rng.IntN(4) {
		now += forward(rng, lim, now)
		if !isQuiet {
			op := []algorithms.Op{{Key: key, Limit: lim, Hits: randomHits(rng, lim)}}
			if d, _ := u.take(m, op, now); d[0].Allowed && op[0].Hits > 0 {
				never.take(op, time.UnixMicro(now))
			}
		}
	}
	keys, args, err := scripts.EncodeUndo(charges, time.UnixMicro(now))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.rdb.EvalSha(context.Background(), u.undoSHA, keys, args...).Err(); err != nil {
		t.Fatalf("trial %d: undo: %v", trial, err)
	}
	m[key] = algorithms.Undo(m[key], charges[0], time.UnixMicro(now))
	if err := sameState(m[key], u.read(key), now); err != nil {
		t.Fatalf("trial %d %+v: after undo: %v", trial, lim, err)
	}
	check := []algorithms.Op{{Key: key, Limit: lim}}
	for range 3 {
		dl, _ := u.take(m, check, now)
		dn := never.take(check, time.UnixMicro(now)).Decisions
		if dl[0].Remaining > dn[0].Remaining || (dl[0].Allowed && !dn[0].Allowed) || (isQuiet && dl[0] != dn[0]) {
			t.Fatalf("trial %d %+v quiet=%v at %d: undone key %s %+v, never-charged %s %+v; charge %+v", trial, lim, isQuiet, now, fmtDecision(dl[0]), m[key], fmtDecision(dn[0]), never[key], charges[0])
		}
		now += forward(rng, lim, now)
	}
	return isQuiet
}

type undoRun struct {
	t                *testing.T
	rdb              *redis.Client
	takeSHA, undoSHA string
}

// take runs ops in Lua and in the Go model, requires the same decisions and
// state, and returns the decisions and the charges Lua reported.
func (u *undoRun) take(m model, ops []algorithms.Op, now int64) ([]algorithms.Decision, []scripts.Charge) {
	u.t.Helper()
	keys, args, err := scripts.Encode(ops, time.UnixMicro(now))
	if err != nil {
		u.t.Fatal(err)
	}
	args = scripts.WithCharges(args)
	reply, err := u.rdb.EvalSha(context.Background(), u.takeSHA, keys, args...).Result()
	if err != nil {
		u.t.Fatal(err)
	}
	out, err := scripts.Decode(reply.([]any)[0], ops, true, false)
	if err != nil {
		u.t.Fatal(err)
	}
	got, charges := out.Decisions, out.Charges
	want := m.take(ops, time.UnixMicro(now))
	for i := range ops {
		if got[i] != want.Decisions[i] || out.Applied[i] != want.Applied[i] {
			u.t.Fatalf("op %d %+v: lua %s applied %d, go %s applied %d", i, ops[i], fmtDecision(got[i]), out.Applied[i], fmtDecision(want.Decisions[i]), want.Applied[i])
		}
	}
	if err := sameCharges(charges, want.Charges); err != nil {
		u.t.Fatalf("charges: %v", err)
	}
	if err := sameState(m[ops[0].Key], u.read(ops[0].Key), now); err != nil {
		u.t.Fatalf("after take: %v", err)
	}
	return got, charges
}

func (u *undoRun) read(key string) stored {
	pipe := u.rdb.Pipeline()
	r := queueRead(context.Background(), pipe, key)
	_, _ = pipe.Exec(context.Background())
	return r.result()
}

func sameCharged(a, b algorithms.Charge) bool {
	return a.Applied == b.Applied && sameRegisters(a.After, b.After) && slices.Equal(a.After.Log, b.After.Log)
}

// forward is randomStep without the clock going back: a charge at an
// earlier time than the state it overwrites (a fixed window's newer window)
// changes more than its hits, so "never charged" is not comparable there.
func forward(rng *rand.Rand, lim algorithms.Limit, now int64) int64 {
	return max(randomStep(rng, lim.Period, now), 0)
}

// TestRunnerUndo: the runner API on Redis TIME. A charged batch reports one
// charge per key it wrote, a denied batch none, and Undo gives the room
// back in one call.
func TestRunnerUndo(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	r := scripts.NewRunner()
	fw := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Period: time.Hour}
	sl := algorithms.Limit{Algorithm: algorithms.SlidingLog, Requests: 3, Period: time.Hour}
	ops := []algorithms.Op{{Key: "{u}fw", Limit: fw, Hits: 2}, {Key: "{u}sl", Limit: sl, Hits: 1}, {Key: "{u}fw", Limit: fw, Hits: 1}}
	ds, charges, err := takeCharges(r.TakeCharged(ctx, rdb, ops, time.Time{}))
	if err != nil || !ds[0].Allowed || !ds[1].Allowed || !ds[2].Allowed {
		t.Fatalf("take: %v %v", ds, err)
	}
	if len(charges) != 2 || charges[0].Key != "{u}fw" || charges[0].Applied != 3 || charges[1].Key != "{u}sl" || len(charges[1].After.Log) != 1 {
		t.Fatalf("charges %+v", charges)
	}
	denied := []algorithms.Op{{Key: "{u}fw", Limit: fw, Hits: 1}}
	if ds, ch, err := takeCharges(r.TakeCharged(ctx, rdb, denied, time.Time{})); err != nil || ds[0].Allowed || len(ch) != 0 {
		t.Fatalf("denied batch: %v %+v %v", ds, ch, err)
	}
	if err := r.Undo(ctx, rdb, charges, time.Time{}); err != nil {
		t.Fatal(err)
	}
	check := []algorithms.Op{{Key: "{u}fw", Limit: fw}, {Key: "{u}sl", Limit: sl}}
	ds, err = takeDecisions(r.Take(ctx, rdb, check, time.Time{}))
	if err != nil || ds[0].Remaining != 3 || ds[1].Remaining != 3 {
		t.Fatalf("after undo: %+v %v", ds, err)
	}
	if n, err := rdb.Exists(ctx, "{u}sl").Result(); err != nil || n != 0 {
		t.Fatalf("the emptied log still exists: %d %v", n, err)
	}
	if ttl := rdb.PTTL(ctx, "{u}fw").Val(); ttl <= 0 {
		t.Fatalf("undo lost the TTL: %s", ttl)
	}
	if err := r.Undo(ctx, rdb, nil, time.Time{}); err != nil {
		t.Fatalf("empty undo: %v", err)
	}
}

// TestUndoAtZeroLimit: a fixed_window limit of 0 counts a shadow op's hits
// in an admitted take, which reports the charge; the undo script takes it
// back as algorithms.Undo does, in the short form (epoch windows) and the
// long one (calendar months) alike.
func TestUndoAtZeroLimit(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	r := scripts.NewRunner()
	for i, lim := range []algorithms.Limit{
		{Algorithm: algorithms.FixedWindow, Period: time.Hour},
		{Algorithm: algorithms.FixedWindow, Period: algorithms.Month, Calendar: true},
	} {
		key := fmt.Sprintf("{z}%d", i)
		usage := []algorithms.Op{{Key: key, Limit: lim, Hits: 2, Usage: true}}
		if _, err := takeDecisions(r.Take(ctx, rdb, usage, time.Time{})); err != nil {
			t.Fatal(err)
		}
		shadow := []algorithms.Op{{Key: key, Limit: lim, Hits: 3, Mode: algorithms.Shadow}}
		_, charges, err := takeCharges(r.TakeCharged(ctx, rdb, shadow, time.Time{}))
		if err != nil || len(charges) != 1 || charges[0].Applied != 3 {
			t.Fatalf("%+v: charges %+v, %v; want one of 3 hits", lim, charges, err)
		}
		if err := r.Undo(ctx, rdb, charges, time.Time{}); err != nil {
			t.Fatal(err)
		}
		v, err := rdb.Get(ctx, key).Int64()
		if err != nil || v/1000 != 2 {
			t.Errorf("%+v: value %d (%v) after the undo, want a count of 2", lim, v, err)
		}
	}
}

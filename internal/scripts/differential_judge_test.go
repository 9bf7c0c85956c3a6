package scripts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// judge holds sequence i's take of a step to the Go model: decisions,
// denials, charges, stored states and TTLs.
func (r *diffRun) judge(step, i int, s *sequence, p diffPending) {
	t := r.t
	reply, err := p.eval.Result()
	if err != nil {
		t.Fatalf("step %d seq %d: evalsha: %v", step, i, err)
	}
	parts, ok := reply.([]any)
	if !ok || len(parts) != 2 {
		t.Fatalf("step %d seq %d: reply %v", step, i, reply)
	}
	out, err := scripts.Decode(parts[0], p.ops, p.charges, p.denials)
	if err != nil {
		t.Fatalf("step %d seq %d: %v", step, i, err)
	}
	got := out.Decisions
	pttl := map[string]int64{}
	for j, v := range parts[1].([]any) {
		pttl[p.ops[j].Key] = v.(int64)
	}
	before := make(map[string]algorithms.State, len(s.keys))
	for _, key := range s.keys {
		st := r.goState[key]
		st.Log = slices.Clone(st.Log)
		before[key] = st
	}
	wb := r.goState.take(p.ops, time.UnixMicro(s.now))
	want, writes := wb.Decisions, wb.Writes
	var b strings.Builder
	for j, op := range p.ops {
		fmt.Fprintf(&b, "\n  op %d %s %+v hits=%d mode=%d usage=%t joined=%t go=%s/%d lua=%s/%d", j, op.Key, op.Limit, op.Hits, op.Mode, op.Usage, op.Joined, fmtDecision(want[j]), wb.Applied[j], fmtDecision(got[j]), out.Applied[j])
	}
	s.note("t=%d%s", s.now, b.String())
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d seq %d: %s\nhistory (newest last):\n%s", step, i, fmt.Sprintf(format, args...), strings.Join(s.history, "\n"))
	}
	for j := range p.ops {
		if got[j] != want[j] || out.Applied[j] != wb.Applied[j] {
			fail("op %d: lua %s applied %d, go %s applied %d", j, fmtDecision(got[j]), out.Applied[j], fmtDecision(want[j]), wb.Applied[j])
		}
		if want[j].Allowed {
			r.allowed++
		} else {
			r.denied++
		}
	}
	if p.charges {
		if err := judgeCharges(p, out, wb, before, s.now); err != nil {
			fail("%v", err)
		}
	}
	for k, key := range s.keys {
		if err := r.judgeKey(key, p.reads[k].result(), writes, pttl[key], p.ops, s.now); err != nil {
			fail("%v", err)
		}
	}
}

// judgeCharges compares the charges (and denials) the take replied with
// the Go batch's (and TakeAll's for the batch denied).
func judgeCharges(p diffPending, out scripts.Outcome, want algorithms.Batch, before map[string]algorithms.State, now int64) error {
	if p.denials {
		// The ops' decisions in a denied batch: TakeAll's with one more
		// op, on a key of its own, that denies it.
		deny := algorithms.Op{Key: "diff:deny", Hits: 1} // an invalid limit
		den := algorithms.TakeAll(append(slices.Clone(p.ops), deny), func(key string) algorithms.State {
			st := before[key]
			st.Log = slices.Clone(st.Log)
			return st
		}, time.UnixMicro(now))
		for j := range out.Denials {
			if out.Denials[j] != den.Decisions[j] || out.DeniedApplied[j] != den.Applied[j] {
				return fmt.Errorf("op %d denial: lua %s applied %d, go %s applied %d", j, fmtDecision(out.Denials[j]), out.DeniedApplied[j], fmtDecision(den.Decisions[j]), den.Applied[j])
			}
		}
	}
	if err := sameCharges(out.Charges, want.Charges); err != nil {
		return fmt.Errorf("charges: %w\n  lua %+v\n  go  %+v", err, out.Charges, want.Charges)
	}
	return nil
}

// judgeKey compares what Redis holds at key after a take with the Go
// model, and the TTL the take gave it.
func (r *diffRun) judgeKey(key string, st stored, writes map[string]algorithms.State, pttl int64, ops []algorithms.Op, now int64) error {
	if err := sameStateMonths(r.goState[key], st, now, r.months[key]); err != nil {
		return fmt.Errorf("key %s: %w", key, err)
	}
	if st.kind == "counter" {
		st.st = r.goState[key] // the same, sameState says: the window a value only tags
	}
	_, written := writes[key]
	switch {
	case written && pttl > 0:
		r.deadline[key] = now + pttl*1000
	case written && pttl == 0:
		delete(r.deadline, key) // deleted: a state that no longer matters
	}
	switch {
	case written && !live(st.st, now):
		// Deleted (sameState checked Redis holds nothing), maybe after an
		// earlier write of the same take (a refund's) recorded its TTL.
	case written && pttl == scripts.KeptTTL:
		r.kept++
		if st.st.ExpiresAt != r.ttlFor[key] {
			return fmt.Errorf("key %s kept the TTL set for ExpiresAt %d, holds %d", key, r.ttlFor[key], st.st.ExpiresAt)
		}
	case written:
		r.ttlFor[key] = st.st.ExpiresAt
		// The TTL is the state's ExpiresAt, which matches the reference's
		// (whose TTLs pkg/algorithms bounds by twice the rules' horizon).
		if err := checkTTL(key, pttl, st, now); err != nil {
			return err
		}
	}
	return nil
}

// corrupt overwrites key's state alike in the Go model and in Redis with
// values a manual edit, another tool or a bad deploy could leave: counts
// far out of range or negative, times years ahead, integers Lua cannot hold
// exactly, counters of other windows or not quite integers, and the TTL
// removed. It returns what it wrote.
func corrupt(ctx context.Context, pipe redis.Pipeliner, m model, key string, now int64, counterPeriod time.Duration, calendar bool, rng *rand.Rand) string {
	const year = 365 * 24 * 3600 * 1_000_000
	pick := func(vals ...int64) int64 { return vals[rng.IntN(len(vals))] }
	expires := pick(now+10*year, now+1, now+1000, 1<<60)
	pipe.Del(ctx, key)
	// A corrupted counter is modelled for epoch windows (counterModel).
	if rng.IntN(4) == 0 && !calendar {
		v := corruptCounter(rng, now, counterPeriod)
		m[key] = counterModel(v, now, counterPeriod)
		pipe.Set(ctx, key, v, 0)
		return fmt.Sprintf("%q: %+v", v, m[key])
	}
	if rng.IntN(3) == 0 {
		hits := pick(1<<41, 5, 1<<60, 1)
		m[key] = algorithms.State{Log: []algorithms.LogEntry{{At: now, Seq: 1, Hits: hits}}, ExpiresAt: expires}
		pipe.ZAdd(ctx, key,
			redis.Z{Score: float64(now), Member: fmt.Sprintf("%d:1:%d", now, hits)},
			redis.Z{Score: float64(expires), Member: fmt.Sprintf("~%d", hits)})
		return fmt.Sprintf("%+v", m[key])
	}
	vals := []int64{-1, 0, 3, -1 << 41, 1 << 41, now, now + 10*year, 1 << 60, -(1 << 60)}
	// A packed state is the Registers family's: fixed_window reads it as
	// absent, as the script reads a 32-byte string where it wants an integer.
	st := scripts.FromRegisters(algorithms.SlidingWindow, pick(vals...), pick(vals...), pick(vals...), expires)
	m[key] = st
	pipe.Set(ctx, key, scripts.PackRegisters(st), 0)
	return fmt.Sprintf("%+v", st)
}

// sameCharges compares the charges the take script reported with the Go
// batch's, which memstore reports: undos and leases give hits back through
// either, so they must agree.
func sameCharges(lua []scripts.Charge, goCh []algorithms.Charge) error {
	if len(lua) != len(goCh) {
		return fmt.Errorf("lua reports %d charges, go %d", len(lua), len(goCh))
	}
	for i, l := range lua {
		g := goCh[i]
		if l.Key != g.Key || l.Limit != g.Limit || l.Applied != g.Applied {
			return fmt.Errorf("charge %d: lua %s %+v applied %d, go %s %+v applied %d", i, l.Key, l.Limit, l.Applied, g.Key, g.Limit, g.Applied)
		}
		if !sameCharged(l, g) {
			return fmt.Errorf("charge %d of %s: lua state %+v, go %+v", i, l.Key, l.After, g.After)
		}
	}
	return nil
}

// corruptCounter is a Counter value of the window of period p current at
// now, the next one, the one before or any, of a count in or out of range,
// or a string INCRBY would refuse or that Lua cannot hold exactly.
func corruptCounter(rng *rand.Rand, now int64, p time.Duration) string {
	if rng.IntN(4) == 0 {
		return []string{"007", "-5", "1e3", " 12", "12.0", "99999999999999999", "9007199254740993", ""}[rng.IntN(8)]
	}
	us := p.Microseconds()
	start := now - now%us + us*[]int64{0, 1, -1, rng.Int64N(2000) - 1000}[rng.IntN(4)]
	count := []int64{0, 1, 5, algorithms.MaxCount, algorithms.MaxCount + 1, 1 << 42, 9_007_199_254_739}[rng.IntN(7)]
	return scripts.PackCounter(algorithms.StateOf(0, algorithms.Window{Start: start, Count: count}, start+us))
}

// counterModel is the Go state of a key holding the Counter value v for
// a limit of period p at now: the window of v's tag nearest to now's (a
// history moves its clock a few hundred windows at most, so no later read
// meets another window of that tag), or a fresh state where the scripts
// read v as absent.
func counterModel(v string, now int64, p time.Duration) algorithms.State {
	us := p.Microseconds()
	st, ok := scripts.UnpackCounter(v, p, time.UnixMicro(now))
	if !ok || st.ExpiresAt != 0 {
		return st
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	index := (now - now%us) / us
	const tags = scripts.CounterTags
	k := index - index%tags + n%tags
	switch {
	case k > index+tags/2:
		k -= tags
	case k <= index-tags/2:
		k += tags
	}
	return algorithms.StateOf(algorithms.FixedWindow, algorithms.Window{Start: k * us, Count: n / tags}, k*us+us)
}

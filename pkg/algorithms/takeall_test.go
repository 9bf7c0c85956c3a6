package algorithms

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// takeAllCase is one batch of TestTakeAll: the states stored before it,
// its ops, and the decisions and writes TakeAll must return at t0.
type takeAllCase struct {
	stored     map[string]State
	ops        []Op
	want       []Decision
	wantWrites map[string]State
}

// fwMinute is a fixed_window limit of n per minute; at t0 its window
// started 20 s ago and ends in 40 s.
func fwMinute(n uint64) Limit { return Limit{Algorithm: FixedWindow, Requests: n, Period: time.Minute} }

var tb10 = Limit{Algorithm: TokenBucket, Requests: 10, Period: time.Second}

// takeAllBasics: verdicts by mode, usage, repeated keys, stored states.
var takeAllBasics = map[string]takeAllCase{
	"all allowed writes every key with hits": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1}, {Key: "b", Limit: fwMinute(5), Hits: 2}, {Key: "c", Limit: fwMinute(5), Hits: 0}},
		want: []Decision{ok(1, 40*s), ok(3, 40*s), ok(5, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.State(t0.UnixMicro() + 40e6),
			"b": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6),
		},
	},
	"one denial consumes nothing and reports checks": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1}, {Key: "b", Limit: fwMinute(1), Hits: 2}, {Key: "c", Limit: fwMinute(3), Hits: 3}},
		want: []Decision{ok(2, 40*s), no(1, 40*s, Never), ok(3, 40*s)},
	},
	"a denied shadow op denies nothing and is counted past its limit": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1}, {Key: "b", Limit: fwMinute(1), Hits: 2, Mode: Shadow}},
		want: []Decision{ok(1, 40*s), recorded(1, 40*s, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.State(t0.UnixMicro() + 40e6),
			"b": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6),
		},
	},
	"an allowed shadow op is charged": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1, Mode: Shadow}},
		want: []Decision{ok(1, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.State(t0.UnixMicro() + 40e6),
		},
	},
	"an enforced denial writes no shadow op either": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1, Mode: Shadow}, {Key: "b", Limit: fwMinute(1), Hits: 2}},
		want: []Decision{ok(2, 40*s), no(1, 40*s, Never)},
	},
	"one quota op with room carries the batch": {
		ops:  []Op{{Key: "q1", Limit: fwMinute(1), Hits: 2, Mode: Quota}, {Key: "q2", Limit: fwMinute(3), Hits: 2, Mode: Quota}, {Key: "e", Limit: fwMinute(5), Hits: 2}},
		want: []Decision{recorded(1, 40*s, 40*s), ok(1, 40*s), ok(3, 40*s)},
		wantWrites: map[string]State{
			"q1": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6),
			"q2": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6),
			"e":  Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6),
		},
	},
	"every quota op denied denies the batch": {
		ops:  []Op{{Key: "q1", Limit: fwMinute(1), Hits: 2, Mode: Quota}, {Key: "q2", Limit: fwMinute(1), Hits: 2, Mode: Quota}, {Key: "e", Limit: fwMinute(5), Hits: 2}},
		want: []Decision{no(1, 40*s, Never), no(1, 40*s, Never), ok(5, 40*s)},
	},
	"usage is recorded past the limit and denies": {
		ops:  []Op{{Key: "u", Limit: fwMinute(3), Hits: 5, Usage: true}, {Key: "t", Limit: fwMinute(10), Hits: 5, Usage: true}},
		want: []Decision{recorded(3, 40*s, 40*s), ok(5, 40*s)},
		wantWrites: map[string]State{
			"u": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.State(t0.UnixMicro() + 40e6),
			"t": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a denied batch records its usage only": {
		ops:  []Op{{Key: "a", Limit: fwMinute(3), Hits: 1}, {Key: "u", Limit: fwMinute(10), Hits: 4, Usage: true}, {Key: "d", Limit: fwMinute(1), Hits: 2}},
		want: []Decision{ok(3, 40*s), ok(6, 40*s), no(1, 40*s, Never)},
		wantWrites: map[string]State{
			"u": Window{Start: t0.UnixMicro() - 20e6, Count: 4}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a check after usage on one key sees the running total": {
		ops:  []Op{{Key: "a", Limit: fwMinute(10), Hits: 1699, Usage: true}, {Key: "a", Limit: fwMinute(10), Hits: 1}},
		want: []Decision{recorded(10, 40*s, 40*s), no(0, 40*s, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1699}.State(t0.UnixMicro() + 40e6),
		},
	},
	"usage over only with the request's admission stays denied with it": {
		ops:  []Op{{Key: "a", Limit: fwMinute(7), Hits: 2}, {Key: "a", Limit: fwMinute(7), Hits: 6, Usage: true}, {Key: "b", Limit: fwMinute(7), Hits: 2}},
		want: []Decision{ok(7, 40*s), recorded(5, 40*s, 40*s), ok(7, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 6}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a usage exactly at the limit is allowed": {
		ops:  []Op{{Key: "a", Limit: fwMinute(10), Hits: 10, Usage: true}, {Key: "a", Limit: fwMinute(10), Hits: 0}},
		want: []Decision{ok(0, 40*s), ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 10}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a repeated key is charged twice": {
		ops:  []Op{{Key: "a", Limit: fwMinute(3), Hits: 2}, {Key: "a", Limit: fwMinute(3), Hits: 1}},
		want: []Decision{ok(1, 40*s), ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 3}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a repeated key over the limit denies both": {
		ops:  []Op{{Key: "a", Limit: fwMinute(3), Hits: 2}, {Key: "a", Limit: fwMinute(3), Hits: 2}},
		want: []Decision{ok(3, 40*s), no(1, 40*s, 40*s)},
	},
	"stored state counts": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(3), Hits: 1}, {Key: "b", Limit: fwMinute(3), Hits: 1}},
		want:   []Decision{ok(0, 40*s), ok(2, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 3}.State(t0.UnixMicro() + 40e6),
			"b": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.State(t0.UnixMicro() + 40e6),
		},
	},
	"expired state reads as fresh": {
		stored: map[string]State{"a": Window{Start: 1, Count: 99}.State(t0.UnixMicro())},
		ops:    []Op{{Key: "a", Limit: fwMinute(3), Hits: 0}},
		want:   []Decision{ok(3, 40*s)},
	},
	"another family's state reads as fresh": {
		stored: map[string]State{"a": {Log: []LogEntry{{At: t0.UnixMicro(), Seq: 1, Hits: 5}}, ExpiresAt: t0.UnixMicro() + 1e6}},
		ops:    []Op{{Key: "a", Limit: tb10, Hits: 10}},
		want:   []Decision{ok(0, s)},
		wantWrites: map[string]State{
			"a": Bucket{Last: t0.UnixMicro(), Tokens: 0}.State(t0.UnixMicro() + 1e6),
		},
	},
	"an invalid limit denies the batch": {
		ops:  []Op{{Key: "a", Limit: fwMinute(3), Hits: 1}, {Key: "b", Limit: Limit{Algorithm: FixedWindow, Requests: 1}, Hits: 0}},
		want: []Decision{ok(3, 40*s), no(0, 0, Never)},
	},
}

// takeAllSpare: a Spare op (a lease top-up riding on a request) is taken
// only if it fits, never denying, never recorded past its limit.
var takeAllSpare = map[string]takeAllCase{
	"an admitted batch charges an allowed Spare op": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "b", Limit: fwMinute(5), Hits: 3, Mode: Spare}},
		want: []Decision{ok(4, 40*s), ok(2, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.State(t0.UnixMicro() + 40e6),
			"b": Window{Start: t0.UnixMicro() - 20e6, Count: 3}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a denied Spare op denies nothing and is not charged": {
		stored: map[string]State{"b": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "b", Limit: fwMinute(3), Hits: 2, Mode: Spare}},
		want:   []Decision{ok(4, 40*s), no(1, 40*s, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a Spare op alone over its limit is denied and writes nothing": {
		ops:  []Op{{Key: "b", Limit: fwMinute(3), Hits: 4, Mode: Spare}},
		want: []Decision{no(3, 40*s, Never)},
	},
	"a denied batch charges no Spare op": {
		ops:  []Op{{Key: "b", Limit: fwMinute(5), Hits: 2, Mode: Spare}, {Key: "d", Limit: fwMinute(1), Hits: 2}},
		want: []Decision{ok(5, 40*s), no(1, 40*s, Never)},
	},
	"a Spare op after an Enforce op on one key sees the running total": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 3}, {Key: "a", Limit: fwMinute(5), Hits: 3, Mode: Spare}},
		want: []Decision{ok(2, 40*s), no(2, 40*s, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 3}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a Spare op that fits the running total is charged with it": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 3}, {Key: "a", Limit: fwMinute(5), Hits: 2, Mode: Spare}},
		want: []Decision{ok(2, 40*s), ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.State(t0.UnixMicro() + 40e6),
		},
	},
	"an Enforce op after a denied Spare op on one key is not held back by it": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 6, Mode: Spare}, {Key: "a", Limit: fwMinute(5), Hits: 5}},
		want: []Decision{no(5, 40*s, Never), ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.State(t0.UnixMicro() + 40e6),
		},
	},
}

// takeAllAtRest: a key left at rest is written expired for good.
var takeAllAtRest = map[string]takeAllCase{
	// A key left at rest (here a full bucket, by a check under a lower
	// Burst) is written expired for good, however the batch ends: an
	// op with an invalid limit after it drops it through Take in the
	// denied batch, and a clock that goes back must not tell the two
	// apart (take.lua deletes the key either way).
	"a key left at rest is written expired": {
		ops:  []Op{{Key: "a", Limit: tb10, Hits: 1}, {Key: "a", Limit: Limit{Algorithm: TokenBucket, Requests: 10, Period: time.Second, Burst: 1}}},
		want: []Decision{ok(9, 100*ms), ok(1, 0)},
		wantWrites: map[string]State{
			"a": {ExpiresAt: 1},
		},
	},
	"a key left at rest is written expired in a denied batch too": {
		ops: []Op{
			{Key: "a", Limit: tb10, Hits: 1, Usage: true},
			{Key: "a", Limit: Limit{Algorithm: TokenBucket, Requests: 10, Period: time.Second, Burst: 1}, Usage: true},
			{Key: "a", Limit: Limit{Algorithm: TokenBucket, Requests: 10}, Usage: true},
		},
		want: []Decision{ok(9, 100*ms), ok(1, 0), no(0, 0, Never)},
		wantWrites: map[string]State{
			"a": {ExpiresAt: 1},
		},
	},
}

// takeAllRefunds: refunds (NegativeHits) are applied first, whatever the
// verdict; the other ops are judged on the refunded states.
var takeAllRefunds = map[string]takeAllCase{
	"a refund is kept in a denied batch": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.State(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(5), Hits: 3, Mode: NegativeHits}, {Key: "d", Limit: fwMinute(1), Hits: 2}},
		want:   []Decision{ok(3, 40*s), no(1, 40*s, Never)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6),
		},
	},
	"an admission is judged after the refunds, wherever they are": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.State(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(5), Hits: 2}, {Key: "a", Limit: fwMinute(5), Hits: 3, Mode: NegativeHits}},
		want:   []Decision{ok(1, 40*s), ok(3, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 4}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a refund is allowed past the limit too": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 25}.State(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(10), Hits: 3, Mode: NegativeHits}},
		want:   []Decision{ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 22}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a refund of a fresh key writes nothing": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 3, Mode: NegativeHits}},
		want: []Decision{ok(5, 40*s)},
	},
	"a refund ends a quota alternative": {
		ops: []Op{
			{Key: "q1", Limit: fwMinute(1), Hits: 2, Mode: Quota},
			{Key: "r", Limit: fwMinute(5), Hits: 1, Mode: NegativeHits},
			{Key: "q2", Limit: fwMinute(5), Hits: 2, Mode: Quota, Joined: true},
		},
		want: []Decision{recorded(1, 40*s, 40*s), ok(5, 40*s), ok(3, 40*s)},
		wantWrites: map[string]State{
			"q1": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6),
			"q2": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.State(t0.UnixMicro() + 40e6),
		},
	},
	"usage, an admission and a refund on one key": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 9}.State(t0.UnixMicro() + 40e6)},
		ops: []Op{
			{Key: "a", Limit: fwMinute(10), Hits: 2},
			{Key: "a", Limit: fwMinute(10), Hits: 4, Usage: true},
			{Key: "a", Limit: fwMinute(10), Hits: 5, Mode: NegativeHits},
		},
		want: []Decision{ok(4, 40*s), ok(0, 40*s), ok(6, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 10}.State(t0.UnixMicro() + 40e6),
		},
	},
	"a refund to fresh writes the key expired": {
		stored: map[string]State{"a": Bucket{Last: t0.UnixMicro(), Tokens: 4}.State(t0.UnixMicro() + 600e3)},
		ops:    []Op{{Key: "a", Limit: tb10, Hits: 7, Mode: NegativeHits}},
		want:   []Decision{ok(10, 0)},
		wantWrites: map[string]State{
			"a": {ExpiresAt: 1},
		},
	},
}

func TestTakeAll(t *testing.T) {
	for _, table := range []map[string]takeAllCase{takeAllBasics, takeAllSpare, takeAllAtRest, takeAllRefunds} {
		for name, tc := range table {
			t.Run(name, func(t *testing.T) { checkTakeAll(t, tc) })
		}
	}
}

// checkTakeAll runs tc's batch at t0: its decisions, its writes, and one
// load per key.
func checkTakeAll(t *testing.T, tc takeAllCase) {
	loads := 0
	load := func(key string) State { loads++; return tc.stored[key] }
	b := TakeAll(tc.ops, load, t0)
	got, writes := b.Decisions, b.Writes
	for i := range tc.want {
		if got[i] != tc.want[i] {
			t.Errorf("op %d: got %s, want %s", i, fmtD(got[i]), fmtD(tc.want[i]))
		}
	}
	if len(writes) != len(tc.wantWrites) {
		t.Fatalf("writes %+v, want %+v", writes, tc.wantWrites)
	}
	for k, w := range tc.wantWrites {
		g, found := writes[k]
		if !found || g.regs != w.regs || g.ExpiresAt != w.ExpiresAt || len(g.Log) != len(w.Log) {
			t.Errorf("write %s = %+v, want %+v", k, g, w)
		}
	}
	keys := map[string]bool{}
	for _, op := range tc.ops {
		keys[op.Key] = true
	}
	if loads != len(keys) {
		t.Errorf("loaded %d times for %d keys", loads, len(keys))
	}
}

// Take never edits the caller's log: TakeAll keeps the original state to
// re-check allowed ops after a denial.
func TestSlidingLogDoesNotAliasInput(t *testing.T) {
	lim := Limit{Algorithm: SlidingLog, Requests: 10, Period: s}
	log := make([]LogEntry, 1, 8)
	log[0] = LogEntry{At: t0.UnixMicro(), Seq: 1, Hits: 1}
	st := State{Log: log, ExpiresAt: t0.UnixMicro() + 1e6}
	_, a := Take(lim, st, 1, t0)
	_, b := Take(lim, st, 2, t0)
	if a.Log[1].Hits != 1 || b.Log[1].Hits != 2 || len(st.Log) != 1 || log[:2][1] != (LogEntry{}) {
		t.Fatalf("logs share memory: %+v %+v %+v", a.Log, b.Log, log[:2])
	}
	if a.Log[1].Seq != 2 {
		t.Fatalf("second entry in the same µs has seq %d, want 2", a.Log[1].Seq)
	}
}

// TestTakeDistinctMatchesGeneral: the distinct-keys path of TakeAll gives
// the decisions and writes of the general path on random batches of every
// algorithm, mode and state (a stored state comes from earlier random takes).
func TestTakeDistinctMatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	keys := []string{"a", "b", "c", "d", "e"}
	stored := map[string]State{}
	load := func(key string) State {
		st := stored[key]
		st.Log = slices.Clone(st.Log)
		return st
	}
	now := t0
	denied, written := 0, 0
	for step := range 20000 {
		now = now.Add(time.Duration(rng.Int64N(int64(2 * s))))
		ops := make([]Op, 1+rng.IntN(len(keys)))
		for i, k := range rng.Perm(len(keys))[:len(ops)] {
			lim := randLimit(rng, All()[rng.IntN(len(All()))], rng.IntN(2) == 0)
			ops[i] = Op{Key: keys[k], Limit: lim, Hits: randHits(rng, lim), Mode: Mode(rng.IntN(5))} // 0 (Enforce) .. Spare; refunds take another path (takeRefunded)
		}
		if !distinctKeys(ops) {
			t.Fatalf("step %d: distinct keys %v not recognised", step, ops)
		}
		gb, gw := distinctWrites(t, ops, load, now)
		wb := takeGeneral(ops, load, now)
		ww := wb.Writes
		if !slices.Equal(gb.Decisions, wb.Decisions) || !slices.Equal(gb.Applied, wb.Applied) || len(gw) != len(ww) || !sameCharges(gb.Charges, wb.Charges) {
			t.Fatalf("step %d %+v: distinct %+v writes %v, general %+v writes %v", step, ops, gb, gw, wb, ww)
		}
		for k, w := range ww {
			g, found := gw[k]
			if !found || g.regs != w.regs || g.ExpiresAt != w.ExpiresAt || !slices.Equal(g.Log, w.Log) {
				t.Fatalf("step %d: write %s distinct %+v, general %+v", step, k, g, w)
			}
			stored[k] = w
		}
		if ww == nil {
			denied++
		}
		written += len(ww)
	}
	if denied < 1000 || written < 1000 {
		t.Errorf("the random batches barely explore both outcomes: %d denied, %d writes", denied, written)
	}
	if distinctKeys([]Op{{Key: "a"}, {Key: "b"}, {Key: "a"}}) {
		t.Error("a repeated key counts as distinct")
	}
}

// distinctWrites is takeDistinct with the states it saves gathered as
// TakeAll returns them; a key saved twice fails t.
func distinctWrites(t *testing.T, ops []Op, load func(string) State, now time.Time) (Batch, map[string]State) {
	t.Helper()
	var writes map[string]State
	b := takeDistinct(ops, load, func(key string, st State) {
		if _, again := writes[key]; again {
			t.Fatalf("takeDistinct saved %s twice", key)
		}
		if writes == nil {
			writes = map[string]State{}
		}
		writes[key] = st
	}, now, true)
	return b, writes
}

// TestTakeAllIntoMatchesTakeAll: TakeAllInto decides as TakeAll and saves
// exactly its writes, each key once and after every load, on random
// batches of every algorithm and mode, refunds and repeated keys included.
func TestTakeAllIntoMatchesTakeAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 19))
	keys := []string{"a", "b", "c"}
	stored := map[string]State{}
	now := t0
	saved := 0
	for step := range 5000 {
		now = now.Add(time.Duration(rng.Int64N(int64(2 * s))))
		ops := make([]Op, 1+rng.IntN(4))
		for i := range ops {
			lim := randLimit(rng, All()[rng.IntN(len(All()))], rng.IntN(2) == 0)
			ops[i] = Op{Key: keys[rng.IntN(len(keys))], Limit: lim, Hits: randHits(rng, lim), Mode: Mode(rng.IntN(int(NegativeHits) + 1))}
		}
		want := TakeAll(ops, func(key string) State {
			st := stored[key]
			st.Log = slices.Clone(st.Log)
			return st
		}, now)
		got := map[string]State{}
		wantD, wantW := want.Decisions, want.Writes
		gotD, gotA := TakeAllInto(ops, func(key string) State {
			if len(got) > 0 {
				t.Fatalf("step %d: load(%s) after a save", step, key)
			}
			st := stored[key]
			st.Log = slices.Clone(st.Log)
			return st
		}, func(key string, st State) {
			if _, again := got[key]; again {
				t.Fatalf("step %d: %s saved twice", step, key)
			}
			got[key] = st
		}, now)
		if !slices.Equal(gotD, wantD) || !slices.Equal(gotA, want.Applied) || len(got) != len(wantW) {
			t.Fatalf("step %d %+v: TakeAllInto %v %v saved %v, TakeAll %v %v writes %v", step, ops, gotD, gotA, got, wantD, want.Applied, wantW)
		}
		for k, w := range wantW {
			if g, found := got[k]; !found || !sameState(g, w) || g.Family() != w.Family() {
				t.Fatalf("step %d: %s saved %+v, TakeAll writes %+v", step, k, g, w)
			}
			stored[k] = w
		}
		saved += len(got)
	}
	if saved < 1000 {
		t.Errorf("the random batches barely write: %d states saved", saved)
	}
}

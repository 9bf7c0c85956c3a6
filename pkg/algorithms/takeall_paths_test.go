package algorithms

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

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
			if g, found := got[k]; !found || !sameState(g, w) || g.familyOf() != w.familyOf() {
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

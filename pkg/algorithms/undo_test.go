package algorithms

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// apply is what a store keeps after one op: the next state if it charged.
func apply(lim Limit, st State, hits uint64, now time.Time) State {
	d, next := Take(lim, st, hits, now)
	if d.Allowed && hits > 0 {
		return next
	}
	return st
}

// chargedBy is the Charge of a take of hits under lim from before to after.
func chargedBy(lim Limit, hits uint64, before, after State) Charge {
	ch := Charge{Limit: lim, Applied: hits, After: after}
	if len(after.Log) > 0 {
		ch.After.Log = nil
		for _, e := range after.Log {
			if !slices.Contains(before.Log, e) {
				ch.After.Log = append(ch.After.Log, e)
			}
		}
	}
	return ch
}

// TestUndoNeverGivesMoreRoom: charge, let time pass while other requests
// hit the key (or not), undo, and compare with the key never charged but
// hit by the same admitted requests (the charge may have denied others;
// undoing cannot admit them after the fact): at
// the undo and later, the undone key never admits what the never-charged
// one would deny nor offers more remaining, and while nothing else hit the
// key it decides exactly as the never-charged one.
func TestUndoNeverGivesMoreRoom(t *testing.T) {
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(alg), 11))
			undone, quietRuns := 0, 0
			for trial := range 3000 {
				lim := randLimit(rng, alg, true)
				now := t0.Add(time.Duration(rng.Int64N(1e9)) * us)
				var st State
				for range rng.IntN(6) {
					now = now.Add(randStep(rng, lim))
					st = apply(lim, st, randHits(rng, lim), now)
				}
				now = now.Add(randStep(rng, lim))
				hits := 1 + rng.Uint64N(min(lim.Capacity()+lim.MaxDebt, 10))
				d, charged := Take(lim, st, hits, now)
				if !d.Allowed {
					continue
				}
				ch := chargedBy(lim, hits, st, charged)
				never, cur := st, charged
				quiet := rng.IntN(3) == 0
				for range rng.IntN(5) {
					now = now.Add(randStep(rng, lim))
					if rng.IntN(4) == 0 {
						// Long enough for a bucket to fill up again.
						refill := lim.Period.Microseconds() * int64(1+lim.Capacity()/lim.Requests)
						now = now.Add(time.Duration(rng.Int64N(2*refill+1)) * us)
					}
					if !quiet {
						// The never-charged key sees the requests that were
						// in fact admitted: undo cannot un-deny the others.
						h := randHits(rng, lim)
						if next := apply(lim, cur, h, now); h > 0 && !sameState(next, cur) {
							cur, never = next, apply(lim, never, h, now)
						}
					}
				}
				u := Undo(cur, ch, now)
				undone++
				if quiet {
					quietRuns++
				}
				at := now
				for k := range 5 {
					for _, h := range []uint64{0, 1, 2, lim.Capacity(), lim.Capacity() + lim.MaxDebt} {
						du, _ := Take(lim, u, h, at)
						dn, _ := Take(lim, never, h, at)
						bad := (du.Allowed && !dn.Allowed) || (h == 0 && du.Remaining > dn.Remaining)
						if quiet {
							bad = bad || du != dn
						}
						if bad {
							t.Fatalf("trial %d %+v quiet=%v: charged %d, undone at %d, probe %d hits at +%s:\nundone %+v -> %+v\nnever  %+v -> %+v\ncharged %+v, cur %+v",
								trial, lim, quiet, hits, now.UnixMicro(), h, at.Sub(now), u, fmtD(du), never, fmtD(dn), ch, cur)
						}
					}
					at = at.Add(randStep(rng, lim))
					_ = k
				}
			}
			if undone < 500 || quietRuns < 100 {
				t.Errorf("only %d undos (%d quiet) were exercised", undone, quietRuns)
			}
		})
	}
}

func sameState(a, b State) bool {
	return a.regs == b.regs && a.ExpiresAt == b.ExpiresAt && slices.Equal(a.Log, b.Log)
}

// A limit of 0 whose algorithm counts at it (fixed_window: CountsAtZero)
// records a shadow op's hits in an admitted batch, and Batch.Charges
// reports that charge: Undo takes it back as at any limit (a Cluster request denied in
// another slot group charges nothing but usage), with epoch windows and
// calendar months alike.
func TestUndoAtZeroLimit(t *testing.T) {
	for _, lim := range []Limit{
		{Algorithm: FixedWindow, Period: time.Minute},
		{Algorithm: FixedWindow, Period: Month, Calendar: true},
	} {
		now := t0
		_, st := Record(lim, State{}, 2, now)
		ops := []Op{{Key: "k", Limit: lim, Hits: 3, Mode: Shadow}}
		b := TakeAll(ops, func(string) State { return st }, now)
		if len(b.Charges) != 1 || b.Charges[0].Applied != 3 {
			t.Fatalf("%+v: charges %+v, want one of 3 hits", lim, b.Charges)
		}
		undone := Undo(b.Writes["k"], b.Charges[0], now)
		if got := undone.window().Count; got != 2 {
			t.Errorf("%+v: count %d after the undo, want the 2 before the charge", lim, got)
		}
	}
}

package algorithms

import (
	"math/rand/v2"
	"testing"
	"time"
)

// usageHistory runs fn on random histories of alg mixing admissions (Take)
// and usage reports (Record, sometimes far past the capacity).
func usageHistory(t *testing.T, alg Algorithm, fn func(lim Limit, st State, now time.Time, hits uint64, d Decision, next State)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(alg), 17))
	for range 200 {
		lim := randLimit(rng, alg, true)
		now := t0.Add(time.Duration(rng.Int64N(1e9)) * us)
		var st State
		for range 60 {
			now = now.Add(randStep(rng, lim))
			hits := randHits(rng, lim)
			if rng.IntN(4) == 0 {
				hits *= 1 + rng.Uint64N(5)
			}
			var d Decision
			var next State
			if rng.IntN(2) == 0 {
				d, next = Record(lim, st, hits, now)
				fn(lim, st, now, hits, d, next)
				if t.Failed() {
					t.Fatalf("limit %+v", lim)
				}
				st = next
				continue
			}
			d, next = Take(lim, st, hits, now)
			if d.Allowed && hits > 0 {
				st = next
			}
		}
	}
}

func TestRecord(t *testing.T) {
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			forced := 0
			defer func() {
				if forced < 500 {
					t.Errorf("only %d reports were recorded past the limit", forced)
				}
			}()
			usageHistory(t, alg, func(lim Limit, st State, now time.Time, hits uint64, d Decision, next State) {
				taken, takenNext := Take(lim, st, hits, now)
				if taken.Allowed {
					// Hits that fit are taken exactly as Take takes them.
					if d != taken || !sameState(next, takenNext) {
						t.Fatalf("%d hits that fit: Record %+v %+v, Take %+v %+v", hits, d, next, taken, takenNext)
					}
					return
				}
				if d.Allowed {
					t.Fatalf("%d hits Take denies were recorded as allowed", hits)
				}
				if hits == 0 || (lim.Requests == 0 && !alg.Info().CountsAtZero) {
					if !sameState(next, st) && st.ExpiresAt != 0 && now.UnixMicro() < st.ExpiresAt {
						t.Fatalf("a check or a zero rate changed the state")
					}
					return
				}
				forced++
				at := now.UnixMicro()
				spec, _ := lim.Algorithm.lookup()
				if !inRange(spec, lim, next, at) {
					t.Fatalf("recorded state %+v is out of its algorithm's range", next)
				}
				if ttl := next.ExpiresAt - at; ttl <= 0 || ttl > 2*lim.horizon().Microseconds() {
					t.Fatalf("recorded state expires in %dµs, want 1..%d", ttl, 2*lim.horizon().Microseconds())
				}
				// The key is over its limit: a check fails until RetryAfter,
				// exactly, and the report is forgotten within Horizon.
				if c, _ := Take(lim, next, 0, now); c.Allowed {
					t.Fatalf("a check passes right after %d hits were recorded past the limit", hits)
				}
				// It reports what was left before the hits: Take's denial's.
				check, _ := Take(lim, next, 0, now)
				if check.RemainingBefore = taken.Remaining; check != d {
					t.Fatalf("Record answered %+v, want a check on its state %+v with Take's remaining %d before", d, check, taken.Remaining)
				}
				if d.RetryAfter != Never {
					if c, _ := Take(lim, next, 0, now.Add(d.RetryAfter)); !c.Allowed {
						t.Errorf("a check at RetryAfter %s is denied", d.RetryAfter)
					}
					if c, _ := Take(lim, next, 0, now.Add(d.RetryAfter-us)); c.Allowed {
						t.Errorf("a check passes 1µs before RetryAfter %s", d.RetryAfter)
					}
				}
				later := now.Add(lim.horizon())
				fresh, _ := Take(lim, State{}, 0, later)
				if got, _ := Take(lim, next, 0, later); got != fresh {
					t.Errorf("one Horizon (%s) after the report the key reads %+v, a fresh key %+v", lim.horizon(), got, fresh)
				}
			})
		})
	}
}

// A report larger than any capacity is still recorded, and bounded.
func TestRecordBounds(t *testing.T) {
	now := t0
	huge := uint64(MaxCount)
	tests := map[string]struct {
		lim   Limit
		check func(State) bool
	}{
		"fixed_window counts up to MaxCount": {Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Minute},
			func(st State) bool { return st.window().Count == MaxCount }},
		"sliding_window counts up to MaxCount": {Limit{Algorithm: SlidingWindow, Requests: 10, Period: time.Minute},
			func(st State) bool { return st.window().Count == MaxCount }},
		"token_bucket owes at most a bucket past max_debt": {Limit{Algorithm: TokenBucket, Requests: 10, Period: time.Minute, Burst: 20, MaxDebt: 5},
			func(st State) bool { return st.bucket().Tokens == -25 }},
		"leaky_bucket fills to twice its capacity": {Limit{Algorithm: LeakyBucket, Requests: 10, Period: time.Minute},
			func(st State) bool { return st.meter().Level == 20 }},
		"gcra runs two bursts ahead": {Limit{Algorithm: GCRA, Requests: 10, Period: time.Minute},
			func(st State) bool { return st.arrival().TAT == now.UnixMicro()+120e6 }},
		"sliding_log logs up to MaxCount": {Limit{Algorithm: SlidingLog, Requests: 10, Period: time.Minute},
			func(st State) bool { return len(st.Log) == 1 && st.Log[0].Hits == MaxCount }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, st := Record(tc.lim, State{}, huge, now)
			if d.Allowed || d.Remaining != 0 {
				t.Errorf("decision %+v, want a denial with nothing left", d)
			}
			d, st = Record(tc.lim, st, huge, now)
			if d.Allowed || !tc.check(st) {
				t.Errorf("after two reports of %d: %+v, %+v", huge, d, st)
			}
		})
	}
}

// One Horizon after a record, a key reads as fresh, at a limit of 0 too
// (fixed_window counts there: CountsAtZero), with windows of calendar months
// of 31 days as of Period's 30.
func TestHorizonAtZeroLimit(t *testing.T) {
	jan1 := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, lim := range []Limit{
		{Algorithm: FixedWindow, Period: time.Minute},
		{Algorithm: FixedWindow, Period: Month, Calendar: true},
		{Algorithm: FixedWindow, Requests: 1, Period: Month, Calendar: true},
	} {
		_, st := Record(lim, State{}, 2, jan1)
		later := jan1.Add(lim.horizon())
		got, _ := Take(lim, st, 0, later)
		fresh, _ := Take(lim, State{}, 0, later)
		if got != fresh {
			t.Errorf("%+v: one Horizon (%s) after a record the key reads %s, a fresh key %s", lim, lim.horizon(), fmtD(got), fmtD(fresh))
		}
	}
}

// A report on a count already past MaxCount (a limit of 0 keeps counting
// whatever it reads: CountsAtZero) leaves it as it is: a record never gives
// room back, and applies 0, not a negative amount.
func TestRecordPastMaxCountKeepsTheCount(t *testing.T) {
	for _, alg := range All() {
		if !alg.Info().CountsAtZero {
			continue
		}
		t.Run(alg.String(), func(t *testing.T) {
			lim := Limit{Algorithm: alg, Requests: 0, Period: time.Minute}
			_, st := Record(lim, State{}, MaxCount, t0)
			w := st.window()
			w.Count = MaxCount + 1
			st = w.state(st.ExpiresAt)
			b := TakeAll([]Op{{Key: "k", Limit: lim, Hits: 3, Usage: true}}, func(string) State { return st }, t0)
			after := w.Count
			if next, ok := b.Writes["k"]; ok {
				after = next.window().Count
			}
			if after < w.Count || b.Applied[0] != 0 {
				t.Errorf("count %d before the report, %d after, applied %d: want it kept and 0 applied", w.Count, after, b.Applied[0])
			}
		})
	}
}

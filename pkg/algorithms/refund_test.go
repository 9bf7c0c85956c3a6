package algorithms

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// refundHistory runs fn at every step of random histories of alg mixing
// admissions, usage past the limit and refunds, with the state before the
// step and its time.
func refundHistory(t *testing.T, alg Algorithm, fn func(lim Limit, st State, now time.Time)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(alg), 29))
	for range 200 {
		lim := maybeCalendar(rng, randLimit(rng, alg, true))
		now := t0.Add(time.Duration(rng.Int64N(1e9)) * us)
		var st State
		for range 60 {
			now = now.Add(randStep(rng, lim))
			fn(lim, st, now)
			if t.Failed() {
				t.Fatalf("limit %+v", lim)
			}
			hits := randHits(rng, lim)
			switch rng.IntN(3) {
			case 0:
				_, st = Record(lim, st, hits*(1+rng.Uint64N(3)), now)
			case 1:
				_, st = Refund(lim, st, hits, now)
			default:
				if d, next := Take(lim, st, hits, now); d.Allowed && hits > 0 {
					st = next
				}
			}
		}
	}
}

// A refund is never denied; it leaves room between what the key had and
// that plus its hits, never more than a fresh key; a refund of more hits
// than any key holds leaves it exactly as fresh; and one of the hits just
// admitted, at the same instant, gives back exactly the room they took.
func TestRefundBounds(t *testing.T) {
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(alg), 31))
			refundHistory(t, alg, func(lim Limit, st State, now time.Time) {
				before, _ := Take(lim, st, 0, now)
				fresh, _ := Take(lim, State{}, 0, now)
				hits := randHits(rng, lim)
				d, next := Refund(lim, st, hits, now)
				after, _ := Take(lim, next, 0, now)
				if !d.Allowed || d.RetryAfter != 0 || d.Remaining != after.Remaining || d.ResetAfter != after.ResetAfter {
					t.Errorf("refund of %d: %s, want allowed and what a check then says (%s)", hits, fmtD(d), fmtD(after))
				}
				if after.Remaining < before.Remaining || after.Remaining > before.Remaining+hits || after.Remaining > max(fresh.Remaining, before.Remaining) {
					t.Errorf("refund of %d: remaining %d -> %d, want within [%d, %d], and at most fresh %d",
						hits, before.Remaining, after.Remaining, before.Remaining, before.Remaining+hits, fresh.Remaining)
				}
				if _, all := Refund(lim, st, MaxCount, now); !sameAnswer(lim, all, State{}, now) {
					t.Errorf("refund of everything: the key answers %v, a fresh key %v", checks(lim, all, now), checks(lim, State{}, now))
				}
				took, charged := Take(lim, st, hits, now)
				if !took.Allowed || hits == 0 {
					return
				}
				if _, back := Refund(lim, charged, hits, now); !sameAnswer(lim, back, st, now) {
					t.Errorf("take %d then refund them: the key answers %v, before the take %v", hits, checks(lim, back, now), checks(lim, st, now))
				}
			})
		})
	}
}

// sameAnswer reports whether a and b answer alike at now and later: a check
// and one hit, now and after a few steps of time.
func sameAnswer(lim Limit, a, b State, now time.Time) bool {
	return slices.Equal(checks(lim, a, now), checks(lim, b, now))
}

func checks(lim Limit, st State, now time.Time) []Decision {
	var out []Decision
	for _, later := range []time.Duration{0, lim.Period / 3, lim.Period} {
		for _, hits := range []uint64{0, 1} {
			d, _ := Take(lim, st, hits, now.Add(later))
			out = append(out, d)
		}
	}
	return out
}

// The documented rule of each algorithm, state by state.
func TestRefundRule(t *testing.T) {
	now := t0 // 20 s into a minute window
	nowUs := now.UnixMicro()
	start := nowUs - 20e6
	win := Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Minute}
	slw := Limit{Algorithm: SlidingWindow, Requests: 10, Period: time.Minute}
	log := Limit{Algorithm: SlidingLog, Requests: 10, Period: time.Minute}
	tb := Limit{Algorithm: TokenBucket, Requests: 10, Period: 10 * s} // a token a second
	lb := Limit{Algorithm: LeakyBucket, Requests: 10, Period: 10 * s}
	gc := Limit{Algorithm: GCRA, Requests: 10, Period: 10 * s}
	tests := []struct {
		name string
		lim  Limit
		st   State
		hits uint64
		want State
	}{
		{"fixed_window: off the count", win, Window{Start: start, Count: 7}.state(start + 60e6), 3,
			Window{Start: start, Count: 4}.state(start + 60e6)},
		{"fixed_window: down to 0", win, Window{Start: start, Count: 7}.state(start + 60e6), 9,
			Window{Start: start, Count: 0}.state(start + 60e6)},
		{"fixed_window: past the limit too", win, Window{Start: start, Count: 25}.state(start + 60e6), 9,
			Window{Start: start, Count: 16}.state(start + 60e6)},
		{"fixed_window: a stale window gives nothing", win, Window{Start: start - 60e6, Count: 7}.state(start + 60e6), 3,
			Window{Start: start - 60e6, Count: 7}.state(start + 60e6)},
		{"sliding_window: the current window first", slw, Window{Start: start, Count: 3, Prev: 8}.state(start + 120e6), 5,
			Window{Start: start, Count: 0, Prev: 6}.state(start + 60e6)},
		{"sliding_window: within the current window", slw, Window{Start: start, Count: 3, Prev: 8}.state(start + 120e6), 2,
			Window{Start: start, Count: 1, Prev: 8}.state(start + 120e6)},
		{"sliding_window: a previous window read as such", slw, Window{Start: start - 60e6, Count: 4}.state(start + 60e6), 1,
			Window{Start: start, Count: 0, Prev: 3}.state(start + 60e6)},
		{"sliding_window: everything is fresh", slw, Window{Start: start, Count: 3, Prev: 8}.state(start + 120e6), 20,
			Window{Start: start}.state(nowUs)},
		{"sliding_log: newest entries first", log, State{Log: []LogEntry{{nowUs - 70e6, 1, 4}, {nowUs - 30e6, 1, 2}, {nowUs - 10e6, 1, 3}, {nowUs - 10e6, 2, 1}}, ExpiresAt: nowUs + 50e6}, 3,
			State{Log: []LogEntry{{nowUs - 30e6, 1, 2}, {nowUs - 10e6, 1, 1}}, ExpiresAt: nowUs + 50e6}},
		{"sliding_log: an empty log is fresh", log, State{Log: []LogEntry{{nowUs - 10e6, 1, 3}}, ExpiresAt: nowUs + 50e6}, 3,
			State{ExpiresAt: 1}},
		{"token_bucket: tokens back", tb, Bucket{Last: nowUs, Tokens: 2, Frac: 5}.state(nowUs + 8e6), 3,
			Bucket{Last: nowUs, Tokens: 5, Frac: 5}.state(nowUs + 5e6)},
		{"token_bucket: debt repaid first", Limit{Algorithm: TokenBucket, Requests: 10, Period: 10 * s, MaxDebt: 5}, Bucket{Last: nowUs, Tokens: -4}.state(nowUs + 14e6), 6,
			Bucket{Last: nowUs, Tokens: 2}.state(nowUs + 8e6)},
		{"token_bucket: capped at the capacity", tb, Bucket{Last: nowUs, Tokens: 8}.state(nowUs + 2e6), 5,
			Bucket{Last: nowUs, Tokens: 10}.state(nowUs)},
		{"leaky_bucket: the level down", lb, Meter{Last: nowUs, Level: 6}.state(nowUs + 6e6), 4,
			Meter{Last: nowUs, Level: 2}.state(nowUs + 2e6)},
		{"leaky_bucket: down to empty", lb, Meter{Last: nowUs, Level: 6}.state(nowUs + 6e6), 9,
			Meter{Last: nowUs}.state(nowUs)},
		{"gcra: the TAT back", gc, Arrival{TAT: nowUs + 5e6}.state(nowUs + 5e6), 2,
			Arrival{TAT: nowUs + 3e6}.state(nowUs + 3e6)},
		{"gcra: never before now", gc, Arrival{TAT: nowUs + 5e6}.state(nowUs + 5e6), 9,
			Arrival{TAT: nowUs}.state(nowUs)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, got := Refund(tt.lim, tt.st, tt.hits, now)
			if !d.Allowed {
				t.Errorf("refund denied: %s", fmtD(d))
			}
			if !equalState(got, tt.want) {
				t.Errorf("refund of %d: state %+v, want %+v", tt.hits, got, tt.want)
			}
		})
	}
}

func equalState(a, b State) bool {
	return a.regs == b.regs && a.ExpiresAt == b.ExpiresAt && slices.Equal(a.Log, b.Log)
}

// What gives nothing back: no hits, a fresh or expired key, an invalid
// limit, a zero rate (but for fixed_window's count). Each is still
// allowed.
func TestRefundNothing(t *testing.T) {
	now := t0 // 20 s into a minute window
	nowUs := now.UnixMicro()
	start := nowUs - 20e6
	counted := Window{Start: start, Count: 7}.state(start + 60e6)
	tests := []struct {
		name    string
		lim     Limit
		st      State
		hits    uint64
		changed bool
	}{
		{"zero hits", Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Minute}, counted, 0, false},
		{"a fresh key", Limit{Algorithm: GCRA, Requests: 10, Period: time.Minute}, State{}, 3, false},
		{"an expired key", Limit{Algorithm: FixedWindow, Requests: 10, Period: time.Minute}, Window{Start: start, Count: 7}.state(nowUs), 3, false},
		{"an invalid limit", Limit{Algorithm: FixedWindow, Requests: 10}, counted, 3, false},
		{"a zero rate", Limit{Algorithm: TokenBucket, Period: time.Minute}, Bucket{Last: nowUs, Tokens: -3}.state(nowUs + 1e6), 3, false},
		{"a zero rate, sliding_window", Limit{Algorithm: SlidingWindow, Period: time.Minute}, Window{Start: start, Count: 3}.state(start + 120e6), 3, false},
		{"a zero rate, sliding_log", Limit{Algorithm: SlidingLog, Period: time.Minute}, State{Log: []LogEntry{{nowUs - 1e6, 1, 3}}, ExpiresAt: nowUs + 59e6}, 3, false},
		{"fixed_window keeps its count at a zero rate", Limit{Algorithm: FixedWindow, Period: time.Minute}, counted, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, got, given := refund(tt.lim, tt.st, tt.hits, now)
			if changed := given > 0; !d.Allowed || changed != tt.changed {
				t.Errorf("refund: %s, changed %v; want allowed, changed %v", fmtD(d), changed, tt.changed)
			}
			if given == 0 && !equalState(got, tt.st) {
				t.Errorf("unchanged refund returned %+v, want the state as given %+v", got, tt.st)
			}
		})
	}
}

package algorithms

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Properties every algorithm must have, checked over random histories.

var propPeriods = []time.Duration{time.Microsecond, 7 * us, ms, 1234567 * us, s, time.Minute, 24 * time.Hour}

func randLimit(rng *rand.Rand, alg Algorithm, debt bool) Limit {
	for {
		lim := Limit{
			Algorithm: alg,
			Requests:  []uint64{1, 2, 3, 7, 10, 100, 1e6}[rng.IntN(7)],
			Period:    propPeriods[rng.IntN(len(propPeriods))],
		}
		if alg.Info().Bucket && rng.IntN(2) == 0 {
			lim.Burst = 1 + rng.Uint64N(3*lim.Requests)
		}
		if alg.Info().Stepped {
			if rng.IntN(2) == 0 {
				lim.RefillInterval = time.Duration(1+rng.Int64N(lim.Period.Microseconds())) * us
			}
			if debt && rng.IntN(2) == 0 {
				lim.MaxDebt = 1 + rng.Uint64N(2*lim.Capacity())
			}
		}
		if lim.Validate() == nil {
			return lim
		}
	}
}

// maybeCalendar makes a third of the window limits calendar months (1 to
// 3 of them), so that every property holds for months of every length.
func maybeCalendar(rng *rand.Rand, lim Limit) Limit {
	if !lim.Algorithm.Info().Calendar || rng.IntN(3) > 0 {
		return lim
	}
	lim.Calendar, lim.Period = true, time.Duration(1+rng.IntN(3))*Month
	return lim
}

func randHits(rng *rand.Rand, lim Limit) uint64 {
	c := lim.Capacity() + lim.MaxDebt
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1:
		return c + 1 + rng.Uint64N(3)
	case 2, 3, 4:
		return 1
	default:
		return rng.Uint64N(min(c, 10) + 1)
	}
}

func randStep(rng *rand.Rand, lim Limit) time.Duration {
	p := lim.Period.Microseconds()
	switch rng.IntN(5) {
	case 0:
		return 0
	case 1:
		return time.Duration(rng.Int64N(2*p+1)) * us
	default:
		return time.Duration(rng.Int64N(p/5+1)) * us
	}
}

// history runs fn on every op of random single-op histories of alg: the
// state before the op, the op's time, hits, decision and next state.
func history(t *testing.T, alg Algorithm, debt bool, fn func(lim Limit, st State, now time.Time, hits uint64, d Decision, next State)) {
	rng := rand.New(rand.NewPCG(uint64(alg), 7))
	for range 200 {
		lim := maybeCalendar(rng, randLimit(rng, alg, debt))
		now := t0.Add(time.Duration(rng.Int64N(1e9)) * us)
		var st State
		for range 60 {
			now = now.Add(randStep(rng, lim))
			hits := randHits(rng, lim)
			d, next := Take(lim, st, hits, now)
			fn(lim, st, now, hits, d, next)
			if t.Failed() {
				t.Fatalf("limit %+v", lim)
			}
			if d.Allowed && hits > 0 {
				st = next
			}
		}
	}
}

// RetryAfter is exact: the same hits on the same state are admitted at
// now+RetryAfter and not a µs earlier; a denial never changes the state.
func TestRetryAfterIsExact(t *testing.T) {
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			history(t, alg, true, func(lim Limit, st State, now time.Time, hits uint64, d Decision, next State) {
				if d.Allowed {
					if d.RetryAfter != 0 {
						t.Errorf("allowed with RetryAfter %s", d.RetryAfter)
					}
					return
				}
				if d.ResetAfter < d.RetryAfter && d.RetryAfter != Never {
					t.Errorf("denied with ResetAfter %s < RetryAfter %s", d.ResetAfter, d.RetryAfter)
				}
				if d.RetryAfter == Never {
					if hits <= lim.Capacity()+lim.MaxDebt && alg.Info().Bucket {
						t.Errorf("%d hits fit a bucket of %d but RetryAfter is never", hits, lim.Capacity()+lim.MaxDebt)
					}
					return
				}
				if d.RetryAfter <= 0 {
					t.Fatalf("denied %d hits with RetryAfter %s", hits, d.RetryAfter)
				}
				if later, _ := Take(lim, st, hits, now.Add(d.RetryAfter)); !later.Allowed {
					t.Errorf("%d hits denied at now+RetryAfter (%s): %+v", hits, d.RetryAfter, later)
				}
				if earlier, _ := Take(lim, st, hits, now.Add(d.RetryAfter-us)); earlier.Allowed {
					t.Errorf("%d hits already allowed 1µs before RetryAfter (%s)", hits, d.RetryAfter)
				}
			})
		})
	}
}

// A written state expires exactly when it stops mattering: at ExpiresAt
// (= now+ResetAfter) the key is as good as fresh, a µs before it is not.
func TestStateExpiresWhenItStopsMattering(t *testing.T) {
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			history(t, alg, false, func(lim Limit, st State, now time.Time, hits uint64, d Decision, next State) {
				if !d.Allowed || hits == 0 {
					return
				}
				end := time.UnixMicro(next.ExpiresAt)
				if got := now.Add(d.ResetAfter); !got.Equal(end) {
					t.Fatalf("ResetAfter ends at %d, state expires at %d", got.UnixMicro(), next.ExpiresAt)
				}
				fresh, _ := Take(lim, State{}, 0, end)
				if at, _ := Take(lim, next, 0, end); at != fresh {
					t.Errorf("at ExpiresAt the state reads %+v, a fresh key %+v", at, fresh)
				}
				freshBefore, _ := Take(lim, State{}, 0, end.Add(-us))
				if before, _ := Take(lim, next, 0, end.Add(-us)); before.Remaining >= freshBefore.Remaining {
					t.Errorf("1µs before ExpiresAt the state no longer matters: %+v", before)
				}
			})
		})
	}
}

// Remaining is what can be admitted right now (no debt).
func TestRemainingIsAdmissible(t *testing.T) {
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			history(t, alg, false, func(lim Limit, st State, now time.Time, hits uint64, d Decision, next State) {
				after := st
				if d.Allowed {
					after = next
				}
				if d.Remaining > 0 {
					if got, _ := Take(lim, after, d.Remaining, now); !got.Allowed {
						t.Errorf("Remaining %d then denied: %+v", d.Remaining, got)
					}
				}
				if got, _ := Take(lim, after, d.Remaining+1, now); got.Allowed {
					t.Errorf("Remaining %d but %d admitted", d.Remaining, d.Remaining+1)
				}
			})
		})
	}
}

// The buckets (a continuous token bucket, a leaky bucket of the same
// capacity, GCRA) are states for one policy: identical decisions.
func TestBucketsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var algs []Algorithm
	for _, a := range All() {
		if a.Info().Bucket {
			algs = append(algs, a)
		}
	}
	if len(algs) < 2 {
		t.Fatalf("buckets %v: nothing to compare", algs)
	}
	for range 300 {
		lim := randLimit(rng, algs[0], false)
		lim.RefillInterval = 0 // continuous
		sts := make([]State, len(algs))
		now := t0.Add(time.Duration(rng.Int64N(1e9)) * us)
		for range 60 {
			now = now.Add(randStep(rng, lim))
			hits := randHits(rng, lim)
			ds := make([]Decision, len(algs))
			for i, alg := range algs {
				l := lim
				l.Algorithm = alg
				var next State
				ds[i], next = Take(l, sts[i], hits, now)
				if ds[i].Allowed && hits > 0 {
					sts[i] = next
				}
			}
			for i := range ds {
				if ds[i] != ds[0] {
					t.Fatalf("limit %+v, %d hits: %s %+v, %s %+v", lim, hits, algs[0], ds[0], algs[i], ds[i])
				}
			}
		}
	}
}

// Safety: over any span L, a bucket admits at most capacity + max_debt plus
// what refills in L (plus one step); a log at most Requests in any Period,
// a window at most twice that (a fixed window's known edge burst; a sliding
// window's weighted count stays under it).
func TestAdmittedWithinRate(t *testing.T) {
	type admit struct {
		at   int64
		hits uint64
	}
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(alg), 11))
			for range 100 {
				lim := randLimit(rng, alg, true)
				var st State
				var log []admit
				now := t0.Add(time.Duration(rng.Int64N(1e9)) * us)
				p := lim.Period.Microseconds()
				for range 80 {
					now = now.Add(randStep(rng, lim))
					hits := randHits(rng, lim)
					d, next := Take(lim, st, hits, now)
					if !d.Allowed || hits == 0 {
						continue
					}
					st = next
					log = append(log, admit{now.UnixMicro(), hits})
					for i := range log {
						var sum uint64
						span := now.UnixMicro() - log[i].at
						for _, a := range log[i:] {
							sum += a.hits
						}
						var bound uint64
						switch {
						case !alg.Info().Bucket && span >= p:
							continue
						case alg.Info().Log:
							bound = lim.Requests
						case !alg.Info().Bucket:
							bound = 2 * lim.Requests
						default:
							// Stepped refill may credit one step early relative to span.
							refilled := uint64(span + lim.RefillInterval.Microseconds())
							bound = lim.Capacity() + lim.MaxDebt + mulDiv(refilled, lim.Requests, uint64(p)) + 1
						}
						if sum > bound {
							t.Fatalf("limit %+v: %d hits admitted within %dµs, bound %d", lim, sum, span, bound)
						}
					}
				}
			}
		})
	}
}

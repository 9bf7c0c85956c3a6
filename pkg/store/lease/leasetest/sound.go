package leasetest

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

func sound(t *testing.T, clock *storetest.Clock, newLender func() store.Lender, lim algorithms.Limit, seed uint64, periods int) {
	r := newSoundRun(t, clock, newLender, lim, seed)
	r.duration = time.Duration(periods) * lim.Period
	for clock.Now().Sub(r.start) < r.duration {
		r.rephase()
		r.step()
	}
	r.check()
}

// soundRun is one "sound" run: random traffic over two counters of lim
// and its Other, from replicas whose share of it changes with the load.
type soundRun struct {
	*sim
	rng    *rand.Rand
	lim    algorithms.Limit
	k1, k2 string
	limits map[string]algorithms.Limit
	start  time.Time
	// duration is how long (on the fake clock) the run lasts.
	duration time.Duration
	// The load changes every half period, on the window boundaries too: a
	// quiet end of a window leaves leases with room, and a busy start of
	// the next fills it, which is where a block used past its window's end
	// or a slot used late would show. Between, the counter sits at its
	// limit, decided exactly by the backend, so any hit too many shows.
	// The traffic is also split unevenly between the replicas, changing
	// with the load: a replica that falls quiet holds a block while the
	// others fill the counter through the backend.
	mult    float64
	phase   time.Time
	weights [Replicas]int
	// crashed: a replica was killed mid-lease, losing crashLoss unused hits.
	crashed   bool
	crashLoss uint64
}

func newSoundRun(t *testing.T, clock *storetest.Clock, newLender func() store.Lender, lim algorithms.Limit, seed uint64) *soundRun {
	// Short leases and a large fraction, so that blocks end every way
	// often within the run; every other run leases right up to the limit
	// (fraction 1), so that blocks are held while the counter is full.
	fraction := 0.25
	if seed%2 == 1 {
		fraction = 1
	}
	s := newSim(t, clock, newLender, lease.WithTarget(200*time.Millisecond), lease.WithFraction(fraction),
		lease.WithIdle(300*time.Millisecond), lease.WithMaxAge(2*time.Second))
	prefix := keyPrefix(t)
	r := &soundRun{sim: s, rng: rand.New(rand.NewPCG(seed, 19)), lim: lim, k1: prefix + "a", k2: prefix + "b",
		start: clock.Now(), mult: 1, phase: clock.Now().Truncate(lim.Period / 2), weights: [Replicas]int{1, 1, 1}}
	r.limits = map[string]algorithms.Limit{r.k1: lim, r.k2: Other(lim)}
	return r
}

// rephase picks a new load and a new split between the replicas every
// half period.
func (r *soundRun) rephase() {
	half := r.lim.Period / 2
	if now := r.clock.Now(); now.Sub(r.phase) >= half {
		r.phase, r.mult = now.Truncate(half), []float64{0.2, 0.5, 1, 2, 4, 6}[r.rng.IntN(6)]
		for i := range r.weights {
			r.weights[i] = []int{0, 1, 4}[r.rng.IntN(3)]
		}
		r.weights[r.rng.IntN(Replicas)]++ // never all quiet
	}
}

// step waits for the next request, perhaps through a lull or a ReturnAll,
// kills a replica once past half the run, and sends the request.
func (r *soundRun) step() {
	// Mean hits per request ~2.6 (with the rare large ones).
	rate := r.mult * float64(r.lim.Requests) / r.lim.Period.Seconds() / 2.6
	r.advance(time.Duration(r.rng.ExpFloat64() / rate * float64(time.Second)))
	switch p := r.rng.Float64(); {
	case p < 0.003:
		// A lull longer than the idle time: leases end and give back.
		r.advance(300*time.Millisecond + time.Duration(r.rng.Int64N(int64(1200*time.Millisecond))))
	case p < 0.005:
		if err := r.replicas[r.rng.IntN(Replicas)].ReturnAll(context.Background()); err != nil {
			r.t.Fatal(err)
		}
	}
	if i := r.rng.IntN(Replicas); !r.crashed && r.clock.Now().Sub(r.start) > r.duration/2 && r.replicas[i].Stats().Outstanding > 0 {
		// Killed mid-lease: no Close, nothing given back. A new replica
		// takes its place.
		r.crashed, r.crashLoss = true, r.replicas[i].Stats().Outstanding
		r.replicas[i] = r.replica()
	}
	r.take(r.pick(), r.batch())
}

// pick is a replica, by the current weights.
func (r *soundRun) pick() int {
	n := r.rng.IntN(r.weights[0] + r.weights[1] + r.weights[2])
	for i, w := range r.weights {
		if n < w {
			return i
		}
		n -= w
	}
	return 0
}

// batch is a request of one counter or both, of 1 to 3 hits each, now and
// then up to 40.
func (r *soundRun) batch() []store.Request {
	op := func(key string) store.Request {
		hits := 1 + r.rng.Uint64N(3)
		if r.rng.IntN(20) == 0 {
			hits = 1 + r.rng.Uint64N(40)
		}
		return store.Request{Key: key, Limit: r.limits[key], Hits: hits, Lease: true}
	}
	switch p := r.rng.IntN(10); {
	case p < 5:
		return []store.Request{op(r.k1)}
	case p < 8:
		return []store.Request{op(r.k2)}
	}
	return []store.Request{op(r.k1), op(r.k2)}
}

// check replays every counter's admissions and checks that the run
// exercised what the property is about.
func (r *soundRun) check() {
	t := r.t
	if !r.crashed {
		t.Fatal("no replica held a lease to be killed")
	}
	st := r.stats()
	r.close()
	for key, l := range r.limits {
		replay(t, key, l, r.admitted[key])
	}
	t.Logf("%d requests (%d denied), blocks %d (%d refilled ahead), local hits %d, returned %d, lapsed %d; crash lost %d hits (Outstanding of the killed replica)",
		r.requests, r.denied, st.Blocks, st.Refills, st.LocalHits, st.Returned, st.Lapsed, r.crashLoss)
	if st.Blocks == 0 || st.LocalHits == 0 {
		t.Fatal("nothing was leased: the property says nothing")
	}
	if windowed(r.lim) && st.Refills == 0 {
		t.Fatal("no window lease was refilled ahead: the property says nothing of refills")
	}
}

// replay admits every recorded admission, in time order, through
// algorithms.Take on one fresh state: what a single exact limiter would
// have had to admit. Windows also count at most Requests per window.
func replay(t *testing.T, key string, lim algorithms.Limit, adm []admission) {
	t.Helper()
	slices.SortFunc(adm, func(a, b admission) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) })
	var st algorithms.State
	perWindow := map[int64]uint64{}
	p := lim.Period.Microseconds()
	fails := 0
	for i, a := range adm {
		var d algorithms.Decision
		d, st = algorithms.Take(lim, st, a.hits, time.UnixMicro(a.at))
		if !d.Allowed {
			fails++
			if fails <= 5 {
				t.Errorf("%s: admission %d (%d hits at %s) over the limit on replay: %+v",
					key, i, a.hits, time.UnixMicro(a.at).UTC().Format("15:04:05.000000"), d)
			}
		}
		perWindow[a.at-a.at%p] += a.hits
	}
	if fails > 0 {
		t.Fatalf("%s: %d of %d admissions over the limit", key, fails, len(adm))
	}
	if windowed(lim) {
		for w, n := range perWindow {
			if n > lim.Requests {
				t.Errorf("%s: window %s admitted %d > %d", key, time.UnixMicro(w).UTC().Format("15:04:05"), n, lim.Requests)
			}
		}
	}
}

// Package leasetest is issue 19's "Done when" property for pkg/store/lease,
// as a function of the backend, so that the memstore unit test and the
// Redis and Redis Cluster integration tests run the same check.
package leasetest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// Replicas is how many lease stores share the backend.
const Replicas = 3

// SoundSeeds is how many random runs "sound" makes per algorithm.
const SoundSeeds = 4

// Limits are the leasable limits the property runs over, one per
// algorithm that leases (a second key of each uses Other's Requests).
func Limits() []algorithms.Limit {
	return []algorithms.Limit{
		{Algorithm: algorithms.FixedWindow, Requests: 500, Period: time.Second},
		{Algorithm: algorithms.SlidingWindow, Requests: 500, Period: time.Second},
		{Algorithm: algorithms.GCRA, Requests: 500, Period: time.Second, Burst: 250},
		{Algorithm: algorithms.LeakyBucket, Requests: 500, Period: time.Second},
		// T = 1s/700: not a whole number of µs.
		{Algorithm: algorithms.TokenBucket, Requests: 700, Period: time.Second, Burst: 900},
	}
}

// Other is lim with another rate, for the second counter of a batch.
func Other(lim algorithms.Limit) algorithms.Limit {
	lim.Requests = lim.Requests * 3 / 5
	if lim.Burst != 0 {
		lim.Burst = lim.Burst * 3 / 5
	}
	return lim
}

// Property runs, for every limit of Limits, Replicas lease stores over
// lenders from newLender (which must share one backend and read clock):
//
//   - "sound": random traffic of random hits over two counters (batches of
//     one or both), load phases from a third to four times the limit,
//     random idle gaps, random ReturnAll, the sweeper's passes, and one
//     replica killed mid-lease (dropped without Close, replaced by a new
//     one). Replaying every admitted hit in time order through
//     algorithms.Take on one fresh state, at its admission time, must
//     admit every one; windows also count at most Requests per window.
//   - "load": no crash, an offered load of twice the limit from every
//     replica together; at least 95% of the limit is admitted per window
//     (windows), or of capacity + rate*elapsed (buckets).
//
// It logs the admitted/limit ratios and the crash's loss (the killed
// replica's unused hits).
func Property(t *testing.T, clock *storetest.Clock, newLender func() store.Lender) {
	for i, lim := range Limits() {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			for seed := range uint64(SoundSeeds) {
				t.Run(fmt.Sprintf("sound/%d", seed), func(t *testing.T) { sound(t, clock, newLender, lim, uint64(i+1)<<8|seed) })
			}
			t.Run("load", func(t *testing.T) { load(t, clock, newLender, lim, uint64(i+1)) })
		})
	}
}

// admission is hits admitted for a key at a time (local Unix µs), seq
// ordering those of the same µs as they happened.
type admission struct {
	at, seq int64
	hits    uint64
}

// sim drives the replicas on the fake clock and records admissions.
type sim struct {
	t         *testing.T
	clock     *storetest.Clock
	newLender func() store.Lender
	opts      []lease.Option
	replicas  []*lease.Store
	admitted  map[string][]admission
	seq       int64
	nextSweep time.Time
	requests  int
	denied    int
}

func newSim(t *testing.T, clock *storetest.Clock, newLender func() store.Lender, opts ...lease.Option) *sim {
	s := &sim{t: t, clock: clock, newLender: newLender, admitted: map[string][]admission{},
		opts: append([]lease.Option{lease.WithClock(clock.Now), lease.WithSweep(0)}, opts...)}
	for range Replicas {
		s.replicas = append(s.replicas, s.replica())
	}
	s.nextSweep = clock.Now()
	return s
}

func (s *sim) replica() *lease.Store { return lease.New(s.newLender(), s.opts...) }

// advance moves the clock by d, running the sweeper's passes (every 100ms)
// that fall in between, as the replicas' sweepers would.
func (s *sim) advance(d time.Duration) {
	end := s.clock.Now().Add(d)
	for !s.nextSweep.After(end) {
		s.clock.Set(s.nextSweep)
		for _, r := range s.replicas {
			if err := r.Sweep(s.nextSweep); err != nil {
				s.t.Fatal(err)
			}
		}
		s.nextSweep = s.nextSweep.Add(lease.DefaultSweepInterval)
	}
	s.clock.Set(end)
}

// take sends reqs to replica i and records what it admitted.
func (s *sim) take(i int, reqs []store.Request) {
	s.t.Helper()
	res, err := s.replicas[i].Take(context.Background(), reqs)
	if err != nil {
		s.t.Fatal(err)
	}
	s.requests++
	if store.VerdictOf(reqs, res).Denied() {
		s.denied++
		return
	}
	at := s.clock.Now().UnixMicro()
	for _, op := range reqs {
		s.seq++
		s.admitted[op.Key] = append(s.admitted[op.Key], admission{at: at, seq: s.seq, hits: op.Hits})
	}
}

func (s *sim) close() {
	for _, r := range s.replicas {
		if err := r.Close(); err != nil {
			s.t.Error(err)
		}
	}
}

func (s *sim) stats() lease.Stats {
	var sum lease.Stats
	for _, r := range s.replicas {
		st := r.Stats()
		sum.Blocks += st.Blocks
		sum.Refills += st.Refills
		sum.LocalHits += st.LocalHits
		sum.Returned += st.Returned
		sum.Lapsed += st.Lapsed
		sum.Outstanding += st.Outstanding
		sum.ReturnErrors += st.ReturnErrors
	}
	return sum
}

// keyPrefix keeps runs apart on a shared backend (integration tests run
// every algorithm against one Redis).
func keyPrefix(t *testing.T) string { return fmt.Sprintf("%s/%d/", t.Name(), time.Now().UnixNano()) }

func sound(t *testing.T, clock *storetest.Clock, newLender func() store.Lender, lim algorithms.Limit, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 19))
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
	k1, k2 := prefix+"a", prefix+"b"
	limits := map[string]algorithms.Limit{k1: lim, k2: Other(lim)}
	start := clock.Now()
	const duration = 20 * time.Second
	var crashed bool
	var crashLoss uint64
	// The load changes every half period, on the window boundaries too: a
	// quiet end of a window leaves leases with room, and a busy start of
	// the next fills it, which is where a block used past its window's end
	// or a slot used late would show. Between, the counter sits at its
	// limit, decided exactly by the backend, so any hit too many shows.
	// The traffic is also split unevenly between the replicas, changing
	// with the load: a replica that falls quiet holds a block while the
	// others fill the counter through the backend.
	half := lim.Period / 2
	mult, phase := 1.0, clock.Now().Truncate(half)
	weights := [Replicas]int{1, 1, 1}
	pick := func() int {
		n := rng.IntN(weights[0] + weights[1] + weights[2])
		for i, w := range weights {
			if n < w {
				return i
			}
			n -= w
		}
		return 0
	}
	for clock.Now().Sub(start) < duration {
		if now := clock.Now(); now.Sub(phase) >= half {
			phase, mult = now.Truncate(half), []float64{0.2, 0.5, 1, 2, 4, 6}[rng.IntN(6)]
			for i := range weights {
				weights[i] = []int{0, 1, 4}[rng.IntN(3)]
			}
			weights[rng.IntN(Replicas)]++ // never all quiet
		}
		// Mean hits per request ~2.6 (with the rare large ones).
		rate := mult * float64(lim.Requests) / lim.Period.Seconds() / 2.6
		s.advance(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		switch p := rng.Float64(); {
		case p < 0.003:
			// A lull longer than the idle time: leases end and give back.
			s.advance(300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))
		case p < 0.005:
			if err := s.replicas[rng.IntN(Replicas)].ReturnAll(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if i := rng.IntN(Replicas); !crashed && clock.Now().Sub(start) > duration/2 && s.replicas[i].Stats().Outstanding > 0 {
			// Killed mid-lease: no Close, nothing given back. A new replica
			// takes its place.
			crashed, crashLoss = true, s.replicas[i].Stats().Outstanding
			s.replicas[i] = s.replica()
		}
		hits := func() uint64 {
			if rng.IntN(20) == 0 {
				return 1 + rng.Uint64N(40)
			}
			return 1 + rng.Uint64N(3)
		}
		var reqs []store.Request
		switch p := rng.IntN(10); {
		case p < 5:
			reqs = []store.Request{{Key: k1, Limit: limits[k1], Hits: hits(), Lease: true}}
		case p < 8:
			reqs = []store.Request{{Key: k2, Limit: limits[k2], Hits: hits(), Lease: true}}
		default:
			reqs = []store.Request{{Key: k1, Limit: limits[k1], Hits: hits(), Lease: true}, {Key: k2, Limit: limits[k2], Hits: hits(), Lease: true}}
		}
		s.take(pick(), reqs)
	}
	if !crashed {
		t.Fatal("no replica held a lease to be killed")
	}
	st := s.stats()
	s.close()
	for key, l := range limits {
		replay(t, key, l, s.admitted[key])
	}
	t.Logf("%d requests (%d denied), blocks %d (%d refilled ahead), local hits %d, returned %d, lapsed %d; crash lost %d hits (Outstanding of the killed replica)",
		s.requests, s.denied, st.Blocks, st.Refills, st.LocalHits, st.Returned, st.Lapsed, crashLoss)
	if st.Blocks == 0 || st.LocalHits == 0 {
		t.Fatal("nothing was leased: the property says nothing")
	}
	if windowed(lim) && st.Refills == 0 {
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
	if lim.Algorithm == algorithms.FixedWindow || lim.Algorithm == algorithms.SlidingWindow {
		for w, n := range perWindow {
			if n > lim.Requests {
				t.Errorf("%s: window %s admitted %d > %d", key, time.UnixMicro(w).UTC().Format("15:04:05"), n, lim.Requests)
			}
		}
	}
}

func load(t *testing.T, clock *storetest.Clock, newLender func() store.Lender, lim algorithms.Limit, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 95))
	s := newSim(t, clock, newLender) // the default settings
	key := keyPrefix(t) + "hot"
	p := lim.Period
	// Start on a window boundary so that every window counted is whole.
	s.advance(clock.Now().Truncate(p).Add(p).Sub(clock.Now()))
	start := clock.Now()
	const periods = 20
	end := start.Add(periods * p)
	// Hits 1..3 (mean 2) at twice the limit from the replicas together.
	rate := 2 * float64(lim.Requests) / p.Seconds() / 2
	var last time.Time
	for {
		s.advance(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if !clock.Now().Before(end) {
			break
		}
		last = clock.Now()
		s.take(rng.IntN(Replicas), []store.Request{{Key: key, Limit: lim, Hits: 1 + rng.Uint64N(3), Lease: true}})
	}
	st := s.stats()
	s.close()
	adm := s.admitted[key]
	replay(t, key, lim, adm)
	var total uint64
	perWindow := make([]uint64, periods)
	for _, a := range adm {
		total += a.hits
		perWindow[(a.at-start.UnixMicro())/p.Microseconds()] += a.hits
	}
	local := float64(st.LocalHits) / float64(max(total, 1))
	if windowed(lim) {
		minRatio, sum := 2.0, 0.0
		for w, n := range perWindow {
			r := float64(n) / float64(lim.Requests)
			sum += r
			minRatio = min(minRatio, r)
			if r < 0.95 {
				t.Errorf("window %d admitted %d of %d (%.3f)", w, n, lim.Requests, r)
			}
		}
		t.Logf("admitted/limit per window: min %.3f, mean %.3f over %d windows; %.1f%% of hits answered locally, %d blocks (%d refilled ahead), %d returned, %d lapsed",
			minRatio, sum/periods, periods, 100*local, st.Blocks, st.Refills, st.Returned, st.Lapsed)
		return
	}
	elapsed := last.Sub(start)
	bound := float64(lim.Capacity()) + float64(lim.Requests)*elapsed.Seconds()/p.Seconds()
	r := float64(total) / bound
	t.Logf("admitted/(capacity + rate*elapsed) = %d/%.0f = %.3f over %s; %.1f%% of hits answered locally, %d blocks, %d lapsed",
		total, bound, r, elapsed, 100*local, st.Blocks, st.Lapsed)
	if r < 0.95 {
		t.Errorf("admitted %.3f of capacity + rate*elapsed", r)
	}
}

// windowed reports whether lim's leases are window leases, which the
// sweeper refills ahead.
func windowed(lim algorithms.Limit) bool {
	return lim.Algorithm == algorithms.FixedWindow || lim.Algorithm == algorithms.SlidingWindow
}

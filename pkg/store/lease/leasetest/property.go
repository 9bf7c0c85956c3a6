// Package leasetest is issue 19's "Done when" property for pkg/store/lease,
// as a function of the backend, so that the memstore unit test and the
// Redis and Redis Cluster integration tests run the same check.
package leasetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

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
//   - "hot": half the limit offered; nothing is denied, and most hits are
//     answered from leases (hotLocalShare), counted on the fake clock.
//
// It logs the admitted/limit ratios and the crash's loss (the killed
// replica's unused hits).
func Property(t *testing.T, clock *storetest.Clock, newLender func() store.Lender, opts ...Option) {
	sc := scale{seeds: 4, periods: 20}
	for _, o := range opts {
		o(&sc)
	}
	for i, lim := range Limits() {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			for seed := range sc.seeds {
				t.Run(fmt.Sprintf("sound/%d", seed), func(t *testing.T) {
					sound(t, clock, newLender, lim, uint64(i+1)<<8|seed, sc.periods)
				})
			}
			t.Run("load", func(t *testing.T) { load(t, clock, newLender, lim, uint64(i+1), sc.periods) })
			t.Run("hot", func(t *testing.T) { hot(t, clock, newLender, lim, uint64(i+1), sc.periods) })
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

// driven is a run of one hot counter from every replica on the default
// settings, for whole periods.
type driven struct {
	*sim
	key         string
	lim         algorithms.Limit
	start, last time.Time // the first window's start, the last request
	periods     int
}

// drive offers key mult times lim's rate, in hits of 1 to 3, from random
// replicas for periods periods, starting on a window boundary so that
// every window counted is whole.
func drive(t *testing.T, clock *storetest.Clock, newLender func() store.Lender, lim algorithms.Limit, seed uint64, mult float64, periods int) *driven {
	rng := rand.New(rand.NewPCG(seed, 95))
	d := &driven{sim: newSim(t, clock, newLender), key: keyPrefix(t) + "hot", lim: lim, periods: periods}
	p := lim.Period
	d.advance(clock.Now().Truncate(p).Add(p).Sub(clock.Now()))
	d.start = clock.Now()
	end := d.start.Add(time.Duration(d.periods) * p)
	rate := mult * float64(lim.Requests) / p.Seconds() / 2 // mean hits 2
	for {
		d.advance(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if !clock.Now().Before(end) {
			return d
		}
		d.last = clock.Now()
		d.take(rng.IntN(Replicas), []store.Request{{Key: d.key, Limit: lim, Hits: 1 + rng.Uint64N(3), Lease: true}})
	}
}

// finish closes the replicas, replays the admissions, and returns the
// stats, the hits admitted, and those per window.
func (d *driven) finish() (st lease.Stats, total uint64, perWindow []uint64) {
	st = d.stats()
	d.close()
	adm := d.admitted[d.key]
	replay(d.t, d.key, d.lim, adm)
	perWindow = make([]uint64, d.periods)
	for _, a := range adm {
		total += a.hits
		perWindow[(a.at-d.start.UnixMicro())/d.lim.Period.Microseconds()] += a.hits
	}
	return st, total, perWindow
}

// load offers twice the limit: at least 95% of it is admitted per window
// (windows), or of capacity + rate*elapsed (buckets).
func load(t *testing.T, clock *storetest.Clock, newLender func() store.Lender, lim algorithms.Limit, seed uint64, periods int) {
	d := drive(t, clock, newLender, lim, seed, 2, periods)
	st, total, perWindow := d.finish()
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
			minRatio, sum/float64(d.periods), d.periods, 100*local, st.Blocks, st.Refills, st.Returned, st.Lapsed)
		return
	}
	elapsed := d.last.Sub(d.start)
	bound := float64(lim.Capacity()) + float64(lim.Requests)*elapsed.Seconds()/lim.Period.Seconds()
	r := float64(total) / bound
	t.Logf("admitted/(capacity + rate*elapsed) = %d/%.0f = %.3f over %s; %.1f%% of hits answered locally, %d blocks, %d lapsed",
		total, bound, r, elapsed, 100*local, st.Blocks, st.Lapsed)
	if r < 0.95 {
		t.Errorf("admitted %.3f of capacity + rate*elapsed", r)
	}
}

// hotLocalShare is the least share of a hot counter's hits, offered at
// half its limit, that the replicas answer from leases ("hot"): what
// leases are for. Counted on the fake clock, so a loaded machine cannot
// move it. Window leases are refilled ahead (95-97% on memstore); a bucket
// block is taken only by a request that found the last one empty or
// lapsed (81-94%).
func hotLocalShare(lim algorithms.Limit) float64 {
	if windowed(lim) {
		return 0.9
	}
	return 0.7
}

// hot offers half the limit: nothing is denied, and at least
// hotLocalShare of the hits are answered without the backend.
func hot(t *testing.T, clock *storetest.Clock, newLender func() store.Lender, lim algorithms.Limit, seed uint64, periods int) {
	d := drive(t, clock, newLender, lim, seed, 0.5, periods)
	st, total, _ := d.finish()
	local := float64(st.LocalHits) / float64(max(total, 1))
	t.Logf("%d requests, %d denied; %.1f%% of %d hits answered locally, %d blocks (%d refilled ahead), %d returned, %d lapsed",
		d.requests, d.denied, 100*local, total, st.Blocks, st.Refills, st.Returned, st.Lapsed)
	if d.denied > 0 {
		t.Errorf("%d of %d requests denied at half the limit", d.denied, d.requests)
	}
	if want := hotLocalShare(lim); local < want {
		t.Errorf("%.1f%% of the hits answered locally, want at least %.0f%%", 100*local, 100*want)
	}
}

// windowed reports whether lim's leases are window leases, which count at
// most Requests per window and which the sweeper refills ahead.
func windowed(lim algorithms.Limit) bool {
	return lim.Algorithm.Info().WindowLease
}

package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// recorder is a store.Lender decorator over the real backend that records
// what reaches it: the batches, their results, and the charges returned.
type recorder struct {
	store.Lender
	now  func() time.Time
	fail atomic.Bool // every backend call fails
	// during, when set, runs once the backend has decided a TakeCharged
	// batch, before the lease store sees the answer: what happens while
	// the answer is on its way back.
	during  func(reqs []store.Request)
	mu      sync.Mutex
	takes   int // plain Take calls
	batches []backendCall
	returns [][]store.Charge
}

type backendCall struct {
	at      time.Time // the clock when the call was made
	reqs    []store.Request
	res     []store.Result
	charged bool // TakeCharged
}

func (r *recorder) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	if r.fail.Load() {
		return nil, errBackend
	}
	at := r.now()
	res, err := r.Lender.Take(ctx, reqs)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.takes++
	r.batches = append(r.batches, backendCall{at: at, reqs: reqs, res: res})
	return res, err
}

var errBackend = errors.New("backend down")

func (r *recorder) TakeCharged(ctx context.Context, reqs []store.Request) ([]store.Result, []store.Charge, error) {
	if r.fail.Load() {
		return nil, nil, errBackend
	}
	at := r.now()
	res, ch, err := r.Lender.TakeCharged(ctx, reqs)
	if r.during != nil {
		r.during(reqs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, backendCall{at: at, reqs: reqs, res: res, charged: true})
	return res, ch, err
}

func (r *recorder) Return(ctx context.Context, charges []store.Charge) error {
	if r.fail.Load() {
		return errBackend
	}
	r.mu.Lock()
	r.returns = append(r.returns, charges)
	r.mu.Unlock()
	return r.Lender.Return(ctx, charges)
}

// Close leaves the backend open so that tests can read its counters after
// the lease store's Close.
func (r *recorder) Close() error { return nil }

func (r *recorder) returned() (calls int, hits uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, chs := range r.returns {
		for _, ch := range chs {
			hits += ch.Applied
		}
	}
	return len(r.returns), hits
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.batches)
}

func (r *recorder) last() backendCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batches[len(r.batches)-1]
}

// spares is the Spare ops that reached the backend, with their decisions.
func (r *recorder) spares() (ops []store.Request, ds []algorithms.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.batches {
		for i, op := range c.reqs {
			if op.Mode == algorithms.Spare {
				ops = append(ops, op)
				ds = append(ds, c.res[i].Decision)
			}
		}
	}
	return ops, ds
}

// rig is one lease store over a recorded memstore on a fake clock, with
// no sweeper goroutine: tests call Sweep.
type rig struct {
	limit algorithms.Limit // the limit a test's helpers use, when it has one
	t     *testing.T
	clock *storetest.Clock
	mem   *memstore.Store
	rec   *recorder
	s     *lease.Store
}

func newRig(t *testing.T, opts ...lease.Option) *rig {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch())
	mem := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	rec := &recorder{Lender: mem, now: clock.Now}
	s := lease.New(rec, append([]lease.Option{lease.WithClock(clock.Now), lease.WithSweep(0)}, opts...)...)
	t.Cleanup(func() {
		_ = s.Close()
		_ = mem.Close()
	})
	return &rig{t: t, clock: clock, mem: mem, rec: rec, s: s}
}

func (r *rig) lim() algorithms.Limit { return r.limit }

func (r *rig) take(reqs ...store.Request) []store.Result {
	r.t.Helper()
	res, err := r.s.Take(context.Background(), reqs)
	if err != nil {
		r.t.Fatal(err)
	}
	if len(res) != len(reqs) {
		r.t.Fatalf("%d results for %d requests", len(res), len(reqs))
	}
	return res
}

// local takes reqs and reports whether the lease store answered them
// without the backend.
func (r *rig) local(reqs ...store.Request) ([]store.Result, bool) {
	r.t.Helper()
	before := r.rec.calls()
	res := r.take(reqs...)
	return res, r.rec.calls() == before
}

// check is the backend's own answer to a check of key, bypassing leases.
func (r *rig) check(key string, lim algorithms.Limit) algorithms.Decision {
	r.t.Helper()
	res, err := r.mem.Take(context.Background(), []store.Request{{Key: key, Limit: lim}})
	if err != nil {
		r.t.Fatal(err)
	}
	return res[0].Decision
}

// count is the hits a fixed or sliding window counts in its current window
// (no previous window in these tests): Requests - Remaining.
func (r *rig) count(key string, lim algorithms.Limit) uint64 {
	r.t.Helper()
	return lim.Requests - r.check(key, lim).Remaining
}

func (r *rig) sweep() {
	r.t.Helper()
	if err := r.s.Sweep(r.clock.Now()); err != nil {
		r.t.Fatal(err)
	}
}

// warm sends single hits of key every gap until one is answered locally,
// and returns how many hits it sent.
func (r *rig) warm(key string, lim algorithms.Limit, gap time.Duration) uint64 {
	r.t.Helper()
	for n := uint64(1); n <= 20; n++ {
		if _, ok := r.local(hit(key, lim, 1)); ok {
			return n
		}
		r.clock.Advance(gap)
	}
	r.t.Fatalf("%s never leased", key)
	return 0
}

// steady sends n single hits of key gap apart, after advancing the clock
// by gap each, fails the test on a denial, and calls sweep after every
// tenth; it returns how many of the hits after the 100th (the estimate
// has settled) reached the backend.
func (r *rig) steady(key string, lim algorithms.Limit, gap time.Duration, n int, sweep func()) (path int) {
	r.t.Helper()
	for i := 1; i <= n; i++ {
		r.clock.Advance(gap)
		res, local := r.local(hit(key, lim, 1))
		if !res[0].Allowed {
			r.t.Fatalf("hit %d denied", i)
		}
		if !local && i > 100 {
			path++
		}
		if i%10 == 0 {
			sweep()
		}
	}
	return path
}

// sweepFor advances the clock by d in the sweeper's steps (100 ms),
// sweeping at each.
func (r *rig) sweepFor(d time.Duration) {
	r.t.Helper()
	for range d / lease.DefaultSweepInterval {
		r.clock.Advance(lease.DefaultSweepInterval)
		r.sweep()
	}
}

func hit(key string, lim algorithms.Limit, hits uint64) store.Request {
	return store.Request{Key: key, Limit: lim, Hits: hits, Lease: true}
}

func fixed(n uint64, period time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: period}
}

func sliding(n uint64, period time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: n, Period: period}
}

// leasing is a limit of n per period for every algorithm whose leases are
// of kind, as the registry says: a new algorithm is tested as soon as its
// row says it leases.
func leasing(kind func(algorithms.Info) bool, n uint64, period time.Duration) []algorithms.Limit {
	var out []algorithms.Limit
	for _, a := range algorithms.All() {
		if kind(a.Info()) {
			out = append(out, algorithms.Limit{Algorithm: a, Requests: n, Period: period})
		}
	}
	return out
}

// The kinds of lease (leasing).
func windowLease(i algorithms.Info) bool { return i.WindowLease }
func bucketLease(i algorithms.Info) bool { return i.BucketLease }

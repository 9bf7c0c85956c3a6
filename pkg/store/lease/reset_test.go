package lease_test

import (
	"context"
	"math/rand/v2"
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

// holding is one replica's handle on the backend all replicas share: once
// armed, it holds the first batch that takes a block after the backend
// charged it, until released: a block in flight across a reset.
type holding struct {
	*memstore.Store
	armed   atomic.Bool
	held    *atomic.Int64 // batches held, over all replicas
	release chan struct{}
}

func (h *holding) TakeCharged(ctx context.Context, reqs []store.Request) ([]store.Result, []store.Charge, error) {
	res, ch, err := h.Store.TakeCharged(ctx, reqs)
	if hasSpare(reqs) && h.armed.CompareAndSwap(true, false) {
		h.held.Add(1)
		<-h.release
	}
	return res, ch, err
}

func (*holding) Close() error { return nil }

// resetLoad is three replicas under concurrent single hits of one counter,
// and what they admitted after a reset.
type resetLoad struct {
	t        *testing.T
	clock    *storetest.Clock
	mem      *memstore.Store
	lim      algorithms.Limit
	backends []*holding
	replicas []*lease.Store
	// phase: 0 before the reset, 1 during, 2 after; a request counts as
	// after the reset when it started after it.
	phase atomic.Int32
	// The load sends as many requests as it was granted, so that the
	// clock, which moves with them, stays within the counter's window.
	granted, issued, sent atomic.Int64
	held                  atomic.Int64
	after                 atomic.Uint64 // hits admitted by requests started after the reset
	stop                  atomic.Bool
	wg                    sync.WaitGroup
}

func newResetLoad(t *testing.T, lim algorithms.Limit) *resetLoad {
	clock := storetest.NewClock(storetest.Epoch())
	l := &resetLoad{t: t, clock: clock, lim: lim, mem: memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))}
	t.Cleanup(func() { _ = l.mem.Close() })
	for range 3 {
		h := &holding{Store: l.mem, held: &l.held, release: make(chan struct{})}
		l.backends = append(l.backends, h)
		l.replicas = append(l.replicas, lease.New(h, lease.WithClock(clock.Now), lease.WithSweep(0),
			lease.WithTarget(time.Second), lease.WithIdle(time.Second), lease.WithFraction(0.25)))
	}
	return l
}

// run starts n goroutines sending the granted single hits to random
// replicas, the clock moving a millisecond every four of them.
func (l *resetLoad) run(n int) {
	for g := range n {
		l.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 29))
			for !l.stop.Load() {
				if l.issued.Add(1) > l.granted.Load() {
					l.issued.Add(-1)
					time.Sleep(100 * time.Microsecond)
					continue
				}
				phase := l.phase.Load()
				reqs := []store.Request{hit("k", l.lim, 1)}
				res, err := l.replicas[rng.IntN(len(l.replicas))].Take(context.Background(), reqs)
				if err != nil {
					l.t.Error(err)
					return
				}
				if res[0].Allowed && phase == 2 {
					l.after.Add(1)
				}
				if l.sent.Add(1)%4 == 0 {
					l.clock.Advance(time.Millisecond)
				}
			}
		})
	}
}

// grant lets the load send n more requests and sweeps every replica as it
// goes on (when sweep), until all but those held are answered.
func (l *resetLoad) grant(n int64, sweep bool) {
	target := l.granted.Add(n)
	deadline := time.Now().Add(20 * time.Second)
	for l.sent.Load()+l.held.Load() < target {
		if time.Now().After(deadline) {
			l.t.Fatalf("the load stalled at %d requests", l.sent.Load())
		}
		if sweep {
			for _, r := range l.replicas {
				_ = r.Sweep(l.clock.Now())
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// reset runs a counters API reset of the key on every replica, as each
// replica's admin server would for its own leases: Forget, the delete,
// Forget.
func (l *resetLoad) reset() {
	l.phase.Store(1)
	for _, r := range l.replicas {
		r.Forget("k")
	}
	if _, err := l.mem.Reset(context.Background(), []string{"k"}); err != nil {
		l.t.Fatal(err)
	}
	for _, r := range l.replicas {
		r.Forget("k")
	}
	l.phase.Store(2)
}

// A counters API reset under concurrent load on three replicas. Blocks
// are in flight across it (held by the backend handle until the reset is
// done) and leases ended before it wait to be given back. After it the
// counter starts from zero, so the hits admitted by requests that started
// after it are at most the limit, however many are offered.
func TestResetUnderLoad(t *testing.T) {
	lim := fixed(5000, time.Hour)
	l := newResetLoad(t, lim)
	l.run(6)
	l.grant(1500, true)
	// Idle the leases, so that the next requests end them on the request
	// path: their rest waits for a sweep, and none runs before the reset.
	// Their top-ups are held in flight.
	for _, b := range l.backends {
		b.armed.Store(true)
	}
	l.clock.Advance(2 * time.Second)
	l.grant(300, false)
	if l.held.Load() == 0 {
		t.Fatal("no block was in flight to hold: the test says nothing")
	}
	l.reset()
	for _, b := range l.backends {
		b.armed.Store(false)
		close(b.release)
	}
	l.held.Store(0)
	// A few hits count in the fresh counter before the first sweep, which
	// would give the waiting rests back to it.
	l.grant(100, false)
	l.grant(int64(3*lim.Requests), true)
	l.stop.Store(true)
	l.wg.Wait()
	for _, r := range l.replicas {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rg := &rig{t: t, mem: l.mem}
	count := rg.count("k", lim)
	t.Logf("after the reset: %d hits admitted, the backend counts %d (limit %d)", l.after.Load(), count, lim.Requests)
	if got := l.after.Load(); got > lim.Requests {
		t.Errorf("admitted %d hits after the reset, more than the limit %d", got, lim.Requests)
	}
	if count < l.after.Load() {
		t.Errorf("the backend counts %d, fewer than the %d hits admitted after the reset", count, l.after.Load())
	}
}

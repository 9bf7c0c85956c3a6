package fallback_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

var (
	errDown = errors.New("backend down: nothing sent")
	errLost = errors.New("backend reply lost: the call ran")
)

// backend is the shared store the replicas decide on (a memstore standing
// for Redis), which a test takes down (every call refused before it runs),
// makes lose its replies (the call runs, the answer never comes back) or
// restarts empty. It counts the calls that reached it.
type backend struct {
	clock *fakeclock.Clock
	mu    sync.Mutex
	st    *memstore.Store
	down  bool
	lost  int // the next lost calls run and fail
	calls int
	epoch int // bumped when restarted empty
	pause *pause
}

// pause holds the next call that runs, before it runs (before) or after,
// before it answers: at is closed then, and the call goes on once resume
// is.
type pause struct {
	before     bool
	at, resume chan struct{}
}

func (p *pause) hold(before bool) {
	if p != nil && p.before == before {
		close(p.at)
		<-p.resume
	}
}

func newBackend(t *testing.T, clock *fakeclock.Clock) *backend {
	b := &backend{clock: clock, st: memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))}
	t.Cleanup(func() { b.st.Close() })
	return b
}

func (b *backend) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	b.mu.Lock()
	b.calls++
	st, down := b.st, b.down
	lost := b.lost > 0 && !down
	if lost {
		b.lost--
	}
	var p *pause
	if !down {
		p, b.pause = b.pause, nil
	}
	b.mu.Unlock()
	if down {
		return nil, errDown
	}
	p.hold(true)
	res, err := st.Take(ctx, reqs)
	p.hold(false)
	if lost {
		return nil, errLost
	}
	return res, err
}

func (b *backend) Close() error { return nil }

func (b *backend) setDown(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
}

// pauseNext holds the next call that runs, before it runs or after, until
// the returned resume is called, once at is closed (the call is held).
func (b *backend) pauseNext(before bool) (at <-chan struct{}, resume func()) {
	p := &pause{before: before, at: make(chan struct{}), resume: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pause = p
	return p.at, func() { close(p.resume) }
}

func (b *backend) loseReplies(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lost = n
}

// restartEmpty brings the backend back without its data.
func (b *backend) restartEmpty() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.st.Close()
	b.st = memstore.New(memstore.WithClock(b.clock.Now), memstore.WithSweep(0, 0))
	b.down = false
	b.epoch++
}

func (b *backend) callCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// used is what key's counter under lim holds in the backend: its capacity
// less what a check says is left.
func (b *backend) used(t *testing.T, key string, lim algorithms.Limit) uint64 {
	t.Helper()
	b.mu.Lock()
	st := b.st
	b.mu.Unlock()
	res, err := st.Take(context.Background(), []store.Request{{Key: key, Limit: lim, Mode: algorithms.Enforce}})
	if err != nil {
		t.Fatal(err)
	}
	return lim.Capacity() - res[0].Remaining
}

// presence is the replicas as the backend sees them: beats kept for ttl
// on the fake clock, those still local, an epoch that changes when the
// backend restarts empty; it fails while the backend is down.
type presence struct {
	b     *backend
	ttl   time.Duration
	mu    sync.Mutex
	beats map[string]time.Time
	local map[string]bool
	seen  int // the backend epoch the beats belong to
}

func newPresence(b *backend, ttl time.Duration) *presence {
	return &presence{b: b, ttl: ttl, beats: map[string]time.Time{}, local: map[string]bool{}}
}

func (p *presence) Beat(_ context.Context, id string, local bool) (fallback.Members, error) {
	p.b.mu.Lock()
	down, epoch := p.b.down, p.b.epoch
	p.b.mu.Unlock()
	if down {
		return fallback.Members{}, errDown
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.seen {
		p.beats, p.local, p.seen = map[string]time.Time{}, map[string]bool{}, epoch
	}
	now := p.b.clock.Now()
	p.beats[id], p.local[id] = now, local
	m := fallback.Members{Now: now, Oldest: now, Epoch: "epoch-" + strconv.Itoa(epoch)}
	for k, at := range p.beats {
		if now.Sub(at) >= p.ttl {
			delete(p.beats, k)
			delete(p.local, k)
			continue
		}
		m.Live++
		if p.local[k] {
			m.Local++
		}
		if at.Before(m.Oldest) {
			m.Oldest = at
		}
	}
	return m, nil
}

func (p *presence) Leave(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.beats, id)
	delete(p.local, id)
	return nil
}

// t0 is a minute boundary: the windows of perMinute start there.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// perMinute is a fixed window of n a minute.
func perMinute(n uint64) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: time.Minute}
}

// replica is a fallback store over b, with no loop: the test beats and
// reconciles.
func replica(t *testing.T, b *backend, p fallback.Presence, opts ...fallback.Option) *fallback.Store {
	t.Helper()
	opts = append([]fallback.Option{fallback.WithClock(b.clock.Now), fallback.WithInterval(0),
		fallback.WithUncharged(func(err error) bool { return errors.Is(err, errDown) })}, opts...)
	if p != nil {
		opts = append(opts, fallback.WithPresence(p, time.Second))
	}
	s := fallback.New(b, opts...)
	t.Cleanup(func() { s.Close() })
	return s
}

// local is one hit of key under lim, decided locally when the backend
// cannot.
func local(key string, lim algorithms.Limit) store.Request {
	return store.Request{Key: key, Limit: lim, Hits: 1, Mode: algorithms.Enforce, Fallback: store.FallbackLocal}
}

// admitted sends n single-hit requests and counts those admitted, failing
// on an error.
func admitted(t *testing.T, s store.Store, n int, req store.Request) int {
	t.Helper()
	ok := 0
	for range n {
		res, err := s.Take(context.Background(), []store.Request{req})
		if err != nil {
			t.Fatalf("take %s: %v", req.Key, err)
		}
		if res[0].Allowed {
			ok++
		}
	}
	return ok
}

func beat(t *testing.T, ss ...*fallback.Store) {
	t.Helper()
	for _, s := range ss {
		if err := s.Beat(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// rig is one replica, without a presence, over a backend of its own, on a
// fake clock a second into a minute.
func rig(t *testing.T, opts ...fallback.Option) (*fakeclock.Clock, *backend, *fallback.Store) {
	t.Helper()
	clock := fakeclock.New(t0.Add(time.Second))
	b := newBackend(t, clock)
	return clock, b, replica(t, b, nil, opts...)
}

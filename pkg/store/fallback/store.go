package fallback

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

var (
	_ store.Lender    = (*Store)(nil)
	_ store.Admin     = (*Store)(nil)
	_ store.Forgetter = (*Store)(nil)
)

// Store decides, while its backend cannot, the batches that hold a
// FallbackLocal request, in memory with this replica's share of each
// limit, and charges the hits it admitted to the backend once it answers.
type Store struct {
	// Decorator passes lending, returns and the counters API to the
	// backend.
	store.Decorator
	next  store.Store
	local *memstore.Store
	opts  options
	now   func() time.Time
	seen  *seen

	// mu guards the counters decided here and the membership; it is held
	// for the microseconds of a local decision, only during an outage.
	mu      sync.Mutex
	entries map[string]*entry
	members membership
	// active is len(entries), read without mu on the way to the backend.
	active atomic.Int64
	// charges is the last charge's seq, its marker's number: it starts at
	// random so that a store restarted under the same WithID reuses no
	// marker still in the backend.
	charges uint64

	decisions, reconciled, dropped atomic.Uint64

	startOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New wraps next. Nothing runs until a batch holds a FallbackLocal request
// (or Start is called): then the presence beats and the reconcile loop
// runs until Close.
func New(next store.Store, opts ...Option) *Store {
	o := defaults()
	for _, opt := range opts {
		opt(&o)
	}
	if o.id == "" {
		o.id = hex.EncodeToString(randomBytes())
	}
	return &Store{
		Decorator: store.Decorate(next),
		next:      next, opts: o, now: o.now,
		// Shifted so that it never wraps to 0, which means no charge.
		charges: binary.BigEndian.Uint64(randomBytes()) >> 2,
		local:   memstore.New(o.memOptions()...),
		seen:    newSeen(o.maxKeys),
		entries: make(map[string]*entry),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func randomBytes() []byte {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// Take asks the backend; when it fails, a batch with a Local request is
// decided here (see decide), and so is every batch naming a counter
// decided here whose hits the backend has not taken back yet, unless a
// request without a fallback in it needs the backend's answer.
func (s *Store) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	local, none := fallbacks(reqs)
	if !local {
		return s.next.Take(ctx, reqs)
	}
	s.Start()
	if s.active.Load() > 0 && !none && s.stuck(reqs) {
		return s.decide(reqs, true)
	}
	ticket := s.seen.ticket()
	res, err := s.next.Take(ctx, reqs)
	if err == nil {
		s.seen.record(reqs, res, s.now(), ticket)
		return res, nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, err // the caller is gone: nobody to answer
	}
	out, lerr := s.decide(reqs, s.opts.uncharged != nil && s.opts.uncharged(err))
	if lerr != nil {
		return nil, errors.Join(err, lerr)
	}
	return out, nil
}

// fallbacks reports whether reqs hold a Local request, and one without a
// fallback.
func fallbacks(reqs []store.Request) (local, none bool) {
	for i := range reqs {
		switch reqs[i].Fallback {
		case store.FallbackLocal:
			local = true
		case store.FallbackNone:
			none = true
		}
	}
	return local, none
}

// stuck reports whether a Local request of reqs names a counter still
// decided here: it stays here until the backend has taken its hits and
// those of every other replica (see Reconcile).
func (s *Store) stuck(reqs []store.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reqs {
		if _, ok := s.entries[r.Key]; ok && r.Fallback == store.FallbackLocal {
			return true
		}
	}
	return false
}

// Start runs the presence beats and the reconcile loop (WithInterval),
// once; a Take with a Local request starts them too.
func (s *Store) Start() {
	s.startOnce.Do(func() {
		if s.opts.interval <= 0 {
			close(s.done)
			return
		}
		go s.loop()
	})
}

// Forget drops keys' local counts and what the backend said of them (a
// counters reset): hits admitted locally for them are not charged.
func (s *Store) Forget(keys ...string) {
	s.seen.forget(keys...)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.entries, k)
	}
	s.active.Store(int64(len(s.entries)))
	_, _ = s.local.Reset(context.Background(), keys)
	s.Decorator.Forget(keys...)
}

// Stats is what the store has done so far.
type Stats struct {
	// Replicas is the number a limit is shared by now; Keys the counters
	// decided here now (not yet charged back).
	Replicas, Keys int
	// Decisions are batches decided here; Reconciled hits admitted here
	// charged to the backend since; Dropped those that never will be.
	Decisions, Reconciled, Dropped uint64
}

// Stats reports the store's counts.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	n, keys := s.members.divisor(s.opts.replicas), len(s.entries)
	s.mu.Unlock()
	return Stats{Replicas: int(n), Keys: keys, Decisions: s.decisions.Load(),
		Reconciled: s.reconciled.Load(), Dropped: s.dropped.Load()}
}

// Close stops the loop, charges what is pending (within a second), leaves
// the presence (waiting at most a heartbeat, or a second), and closes the
// local store and the backend.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.startOnce.Do(func() { close(s.done) })
		close(s.stop)
		<-s.done
		if s.active.Load() > 0 {
			// A last pass, within a second: what was admitted here reaches
			// Redis if it answers now, instead of never.
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			s.Reconcile(ctx)
			cancel()
		}
		s.mu.Lock()
		beaten := !s.members.beatAt.IsZero()
		s.mu.Unlock()
		if p := s.opts.presence; p != nil && beaten {
			// Best effort: a replica that cannot leave ages out of the
			// others' count within three heartbeats anyway.
			ctx, cancel := context.WithTimeout(context.Background(), min(time.Second, s.opts.heartbeat))
			_ = p.Leave(ctx, s.opts.id)
			cancel()
		}
		s.closeErr = errors.Join(s.local.Close(), s.next.Close())
	})
	return s.closeErr
}

// drop counts hits admitted here that are never charged. mu is held.
func (s *Store) drop(key string, hits uint64) {
	s.dropped.Add(hits)
	if s.opts.dropped != nil {
		s.opts.dropped(key, hits)
	}
}

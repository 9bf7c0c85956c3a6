// Package memstore is the embedded store.Store: every key's state lives in
// this process, so it suits a single replica or tests. Each Take runs
// algorithms.TakeAll under one mutex, which makes a multi-key batch atomic
// with no lock ordering to get wrong; the critical section is a few map
// look-ups and heap fixes, far below the cost of the gRPC call around it.
package memstore

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// ErrClosed is returned by Take after Close.
var ErrClosed = errors.New("memstore: store is closed")

var _ store.Store = (*Store)(nil)

// Store keeps rate-limit state in memory. The zero value is not usable; call New.
type Store struct {
	now     func() time.Time
	maxKeys int

	mu        sync.Mutex
	entries   map[string]*entry
	byExpiry  expiryHeap
	evictions uint64
	closed    bool
}

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, entries: make(map[string]*entry)}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Take decides reqs atomically with the semantics of algorithms.TakeAll.
func (s *Store) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	// Checked under the lock, right before deciding: a caller that gave up
	// while waiting for the lock must not be charged.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: take %d keys: %w", len(reqs), err)
	}
	now := s.now()
	s.dropExpired(now.UnixMicro())
	decisions, writes := algorithms.TakeAll(reqs, s.load, now)
	for key, st := range writes {
		s.save(key, st)
	}

	results := make([]store.Result, len(decisions))
	for i, d := range decisions {
		results[i] = store.Result{Decision: d}
	}
	return results, nil
}

// load hands TakeAll a copy: an algorithm that edits the log in place must
// not change the stored state of a batch that ends up denied.
func (s *Store) load(key string) algorithms.State {
	e, ok := s.entries[key]
	if !ok {
		return algorithms.State{}
	}
	st := e.state
	st.Log = slices.Clone(st.Log)
	return st
}

func (s *Store) save(key string, st algorithms.State) {
	if e, ok := s.entries[key]; ok {
		e.state = st
		heap.Fix(&s.byExpiry, e.index)
		return
	}
	if s.maxKeys > 0 && len(s.entries) >= s.maxKeys {
		// dropExpired already ran for this Take, so the heap's top is live.
		victim := heap.Pop(&s.byExpiry).(*entry)
		delete(s.entries, victim.key)
		s.evictions++
	}
	e := &entry{key: key, state: st}
	s.entries[key] = e
	heap.Push(&s.byExpiry, e)
}

// dropExpired frees every state at or past its expiry, which algorithms.Take
// would read as fresh anyway. Each state is popped once per write that
// extended it, so the cost is amortised over the Takes that wrote it. If the
// wall clock later steps back, a dropped key starts fresh: it fails open for
// at most the step, like a Redis key whose TTL ran out.
func (s *Store) dropExpired(nowMicro int64) {
	for len(s.byExpiry) > 0 && s.byExpiry[0].deadline() <= nowMicro {
		e := heap.Pop(&s.byExpiry).(*entry)
		delete(s.entries, e.key)
	}
}

// Len is the number of keys held, expired states not yet dropped included.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Evictions counts live states dropped to stay within WithMaxKeys.
func (s *Store) Evictions() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evictions
}

// Close frees every state; Take fails afterwards. Closing twice is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.entries = nil
	s.byExpiry = nil
	return nil
}

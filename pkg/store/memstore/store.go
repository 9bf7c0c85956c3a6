// Package memstore is the embedded store.Store: every key's state lives in
// this process, so it suits a single replica or tests.
//
// Keys are spread over 64 shards, each with its own lock, map and expiry
// heap. A Take locks the shards of its keys in index order, which keeps a
// multi-key batch atomic without deadlock, and lets batches on other shards
// run in parallel. Expired states are never swept on the request path: a
// request reads an expired state as fresh, and a background sweeper drops
// them a bounded batch at a time, like Redis's active expiry, so a million
// counters expiring at the same window boundary cost no request a stall.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// ErrClosed is returned by Take after Close.
var ErrClosed = errors.New("memstore: store is closed")

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lender = (*Store)(nil)
)

// Store keeps rate-limit state in memory. The zero value is not usable; call New.
type Store struct {
	now         func() time.Time
	maxKeys     int
	sweepEvery  time.Duration
	sweepBudget time.Duration
	seed        maphash.Seed

	shards    [numShards]shard
	keys      atomic.Int64
	evictions atomic.Uint64
	expired   atomic.Uint64
	takes     atomic.Uint64 // Takes so far, for the sweeper to tell idleness
	closed    atomic.Bool

	closeOnce sync.Once
	stop      chan struct{}
	stopped   chan struct{}
	// sweeper holds the sweeper's own progress; only its goroutine (or a
	// Sweep call, serialised by sweepMu) touches it.
	sweepMu  sync.Mutex
	sweeper  sweeper
	freeHook func()
}

// New returns an empty Store and starts its sweeper, which Close stops.
func New(opts ...Option) *Store {
	s := &Store{
		now:         time.Now,
		maxKeys:     DefaultMaxKeys,
		sweepEvery:  DefaultSweepInterval,
		sweepBudget: DefaultSweepBudget,
		seed:        maphash.MakeSeed(),
		stop:        make(chan struct{}),
		stopped:     make(chan struct{}),
	}
	for _, opt := range opts {
		opt(s)
	}
	for i := range s.shards {
		s.shards[i].init()
	}
	if s.freeHook == nil {
		s.freeHook = freeOSMemory
	}
	if s.sweepEvery > 0 {
		go s.sweepLoop()
	} else {
		close(s.stopped)
	}
	return s
}

// Take decides reqs atomically with the semantics of algorithms.TakeAll.
func (s *Store) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	results, _, err := s.take(ctx, reqs, false)
	return results, err
}

// TakeCharged is Take, also returning what an admitted batch charged each
// key (algorithms.Batch's Charges: what take.lua reports on Redis), for
// pkg/store/lease to give unused hits back with Return.
func (s *Store) TakeCharged(ctx context.Context, reqs []store.Request) ([]store.Result, []store.Charge, error) {
	return s.take(ctx, reqs, true)
}

func (s *Store) take(ctx context.Context, reqs []store.Request, withCharges bool) ([]store.Result, []store.Charge, error) {
	var touched uint64
	for _, r := range reqs {
		touched |= s.shardBit(r.Key)
	}
	s.takes.Add(1)
	b, added, now, err := s.decide(ctx, store.Ops(reqs), touched, withCharges)
	if err != nil {
		return nil, nil, err
	}
	if added > 0 && s.keys.Add(added) > int64(s.maxKeys) && s.maxKeys > 0 {
		s.shed(now.UnixMicro())
	}
	results := make([]store.Result, len(b.Decisions))
	for i, d := range b.Decisions {
		results[i] = store.Result{Decision: d, Applied: b.Applied[i]}
	}
	return results, b.Charges, nil
}

// decide runs TakeAll with the shards of ops locked and saves what it
// writes; it returns how many keys are new, and with withCharges what an
// admitted batch charged.
func (s *Store) decide(ctx context.Context, ops []algorithms.Op, touched uint64, withCharges bool) (algorithms.Batch, int64, time.Time, error) {
	s.lockShards(touched)
	defer s.unlockShards(touched)
	if s.closed.Load() {
		return algorithms.Batch{}, 0, time.Time{}, ErrClosed
	}
	// Checked under the locks, right before deciding: a caller that gave up
	// while waiting for a lock must not be charged.
	if err := ctx.Err(); err != nil {
		return algorithms.Batch{}, 0, time.Time{}, fmt.Errorf("memstore: %w", err)
	}
	now := s.now()
	nowMicro := now.UnixMicro()
	var added int64
	save := func(key string, st algorithms.State) {
		if s.shardOf(key).save(key, st) {
			added++
		}
	}
	load := func(key string) algorithms.State { return s.shardOf(key).load(key, nowMicro) }
	if !withCharges {
		var b algorithms.Batch
		b.Decisions, b.Applied = algorithms.TakeAllInto(ops, load, save, now)
		return b, added, now, nil
	}
	b := algorithms.TakeAll(ops, load, now)
	for key, st := range b.Writes {
		save(key, st)
	}
	return b, added, now, nil
}

// Return takes back each charge as algorithms.Undo does, with the shards
// of the charges' keys locked so no Take interleaves. Undo never leaves
// more room than the charge had not happened, however late it runs; a key
// expired or dropped since has nothing left to give back.
func (s *Store) Return(ctx context.Context, charges []store.Charge) error {
	if len(charges) == 0 {
		return nil
	}
	var touched uint64
	for _, c := range charges {
		touched |= s.shardBit(c.Key)
	}
	s.lockShards(touched)
	defer s.unlockShards(touched)
	if s.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	now := s.now()
	nowMicro := now.UnixMicro()
	for _, c := range charges {
		sh := s.shardOf(c.Key)
		st := sh.load(c.Key, nowMicro)
		if st.ExpiresAt == 0 {
			continue // absent or expired: the window or bucket already forgot it
		}
		sh.save(c.Key, algorithms.Undo(st, c, now))
	}
	return nil
}

// shed brings the key count back to WithMaxKeys after a Take added keys,
// dropping the state closest to expiry across all shards: an expired one
// if any (not an eviction), else the live one that would be forgotten
// soonest anyway. It runs after the Take released its locks, so the bound
// may be passed by as many keys as Takes are adding them at that instant.
func (s *Store) shed(nowMicro int64) {
	for s.keys.Load() > int64(s.maxKeys) {
		best, bestAt := -1, int64(0)
		for i := range s.shards {
			if at := s.shards[i].top.Load(); best < 0 || at < bestAt {
				best, bestAt = i, at
			}
		}
		sh := &s.shards[best]
		sh.mu.Lock()
		if s.keys.Load() <= int64(s.maxKeys) || len(sh.byExpiry) == 0 {
			sh.mu.Unlock()
			return
		}
		e := sh.popTop()
		sh.mu.Unlock()
		s.keys.Add(-1)
		if e.deadline() <= nowMicro {
			s.expired.Add(1)
		} else {
			s.evictions.Add(1)
		}
	}
}

// Len is the number of keys held, expired states not yet swept included.
func (s *Store) Len() int {
	return int(s.keys.Load())
}

// Evictions counts live states dropped to stay within WithMaxKeys.
func (s *Store) Evictions() uint64 {
	return s.evictions.Load()
}

// Expired counts expired states dropped, by the sweeper or to make room.
func (s *Store) Expired() uint64 {
	return s.expired.Load()
}

// Close stops the sweeper and frees every state; Take fails afterwards.
// Closing twice is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.stopped
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			sh.entries, sh.byExpiry = nil, nil
			sh.mu.Unlock()
		}
		s.keys.Store(0)
	})
	return nil
}

// cloneLog hands TakeAll a copy: an algorithm that edits the log in place
// must not change the stored state of a batch that ends up denied.
func cloneLog(st algorithms.State) algorithms.State {
	st.Log = slices.Clone(st.Log)
	return st
}

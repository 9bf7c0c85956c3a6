package lease

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/shardlock"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Store is the leasing decorator. Use New.
type Store struct {
	// Decorator passes lending (the blocks are the caller's, not this
	// store's), returns and the counters API through.
	store.Decorator
	next     store.Lender
	now      func() time.Time
	interval int64 // LEASE_TARGET in µs: the rate window and the block's aim
	maxBlock uint64
	fraction float64
	idle     int64 // µs; 0: never
	maxAge   int64 // µs; 0: never
	perShard int   // keys tracked per shard; 0: no bound
	every    time.Duration
	seed     maphash.Seed
	// refillAhead: Sweep tops up window leases running low (refill.go).
	refillAhead bool

	shards [shardlock.N]shard

	// pending holds window charges ended on the request path (idle, max
	// age, eviction, a changed rule), given back by the next Sweep or
	// ReturnAll so that no request waits for a Return.
	pendMu  sync.Mutex
	pending []store.Charge
	// giving is held (shared) from when a sweep or ReturnAll gathers
	// charges until its Return ends, so that Forget can wait for a Return
	// that may carry a forgotten key's charge (forget.go).
	giving sync.RWMutex

	// lastSweep and lastFull are when a sweep and a full Sweep last ran
	// (µs; 0: never).
	lastSweep, lastFull atomic.Int64

	// Counters the shards' locks do not cover (see shard.counters).
	returned, returnLapsed, returnErrors atomic.Uint64

	lifecycle
}

var (
	_ store.Lender    = (*Store)(nil)
	_ store.Admin     = (*Store)(nil)
	_ store.Forgetter = (*Store)(nil)
)

// lifecycle is the sweeper's and the store's life (lifecycle.go).
type lifecycle struct {
	// life lives as long as the store: every call of the sweeper derives
	// from it, and Stop (past its deadline) and Close cancel it.
	life   context.Context
	cancel context.CancelFunc
	// startMu orders starting the sweeper against stopping the store.
	startMu sync.Mutex
	started atomic.Bool // the sweeper runs, or ran
	closed  atomic.Bool // Stop or Close ran: no sweeper starts, no block is taken or used
	stop    chan struct{}
	stopped chan struct{} // closed when the sweeper has ended (or never will run)
	// rules is SetRules' last fingerprint.
	rules     atomic.Pointer[string]
	closeOnce sync.Once
	closeErr  error
}

// Stats are the lease counters since New (Prometheus: ratelimitd_lease_*).
type Stats struct {
	Blocks    uint64 // blocks taken
	Refills   uint64 // of Blocks, those the sweeper took ahead (refill.go)
	LocalHits uint64 // hits admitted from a block
	Returned  uint64 // unused hits given back
	// Lapsed is unused hits that ended without a return: bucket slots,
	// window ends, failed returns, forgotten keys, blocks that came back
	// after their key was forgotten or its rule changed.
	Lapsed uint64
	// Outstanding is unused hits held now: what a crash would lose.
	Outstanding uint64
	// ReturnErrors is Return calls the backend failed (their hits are in
	// Lapsed).
	ReturnErrors uint64
}

// Stats reports the counters. It takes every shard's lock once: a
// metrics scrape calls it once for all of them.
func (s *Store) Stats() Stats {
	st := Stats{
		Returned:     s.returned.Load(),
		Lapsed:       s.returnLapsed.Load(),
		ReturnErrors: s.returnErrors.Load(),
	}
	var outstanding int64
	for i := range s.shards {
		shd := &s.shards[i]
		shd.mu.Lock()
		c := shd.counters
		shd.mu.Unlock()
		st.Blocks += c.blocks
		st.Refills += c.refills
		st.LocalHits += c.localHits
		st.Lapsed += c.lapsed
		outstanding += c.outstanding
	}
	st.Outstanding = uint64(max(outstanding, 0))
	return st
}

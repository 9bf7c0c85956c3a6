package memstore

import (
	"container/heap"
	"math"
	"sync"
	"sync/atomic"

	"github.com/ratelimitd/ratelimitd/internal/shardlock"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// numShards is shardlock's: the set of shards a batch touches is one
// uint64, locked in index order.
const numShards = shardlock.N

func (s *Store) shardOf(key string) *shard {
	return &s.shards[shardlock.Of(s.seed, key)]
}

// shardBit is key's shard in the set lockShards takes.
func (s *Store) shardBit(key string) uint64 {
	return uint64(shardlock.Bit(shardlock.Of(s.seed, key)))
}

// lockShards locks in ascending index order, the one order every Take
// uses, so two batches can never wait on each other.
func (s *Store) lockShards(set uint64) {
	shardlock.Set(set).Each(func(i uint8) { s.shards[i].mu.Lock() })
}

func (s *Store) unlockShards(set uint64) {
	shardlock.Set(set).Each(func(i uint8) { s.shards[i].mu.Unlock() })
}

// shard is one lock's worth of keys with their expiry heap.
type shard struct {
	mu       sync.Mutex
	entries  map[string]*entry
	byExpiry expiryHeap
	// peak is the most keys held since the last compaction: Go maps never
	// shrink, so the sweeper rebuilds a shard that has fallen far below it.
	peak int
	// top mirrors the heap's earliest deadline for shed, which picks a
	// shard without taking every lock.
	top atomic.Int64
}

func (sh *shard) init() {
	sh.entries = make(map[string]*entry)
	sh.top.Store(math.MaxInt64)
}

// load reads key's state, an expired one as the fresh state it stands for.
func (sh *shard) load(key string, nowMicro int64) algorithms.State {
	e, ok := sh.entries[key]
	if !ok || e.deadline() <= nowMicro {
		return algorithms.State{}
	}
	return cloneLog(e.state)
}

// save stores st under key and reports whether the key is new.
func (sh *shard) save(key string, st algorithms.State) bool {
	if sh.entries == nil { // closed
		return false
	}
	if e, ok := sh.entries[key]; ok {
		was := e.deadline()
		e.state = st
		// A hot key is charged many times within one window or refill:
		// only a deadline that moved needs the heap reordered.
		if e.deadline() != was {
			heap.Fix(&sh.byExpiry, e.index)
			sh.syncTop()
		}
		return false
	}
	e := &entry{key: key, state: st}
	sh.entries[key] = e
	heap.Push(&sh.byExpiry, e)
	sh.peak = max(sh.peak, len(sh.entries))
	sh.syncTop()
	return true
}

// popTop removes the entry closest to expiry; the heap must not be empty.
func (sh *shard) popTop() *entry {
	e := heap.Pop(&sh.byExpiry).(*entry)
	delete(sh.entries, e.key)
	sh.syncTop()
	return e
}

// dropExpired removes up to limit expired entries and says how many went.
func (sh *shard) dropExpired(nowMicro int64, limit int) int {
	n := 0
	for n < limit && len(sh.byExpiry) > 0 && sh.byExpiry[0].deadline() <= nowMicro {
		sh.popTop()
		n++
	}
	return n
}

// compact rebuilds the map and heap once the shard holds under a quarter
// of its peak, so memory of expired keys is given back while idle; it
// returns how many slots it released.
func (sh *shard) compact() int {
	const minPeak = 256
	if sh.entries == nil || sh.peak < minPeak || len(sh.entries) > sh.peak/4 {
		return 0
	}
	released := sh.peak - len(sh.entries)
	entries := make(map[string]*entry, len(sh.entries))
	for k, e := range sh.entries {
		entries[k] = e
	}
	sh.entries = entries
	sh.byExpiry = append(make(expiryHeap, 0, len(sh.byExpiry)), sh.byExpiry...)
	sh.peak = len(sh.entries)
	return released
}

func (sh *shard) syncTop() {
	if len(sh.byExpiry) == 0 {
		sh.top.Store(math.MaxInt64)
		return
	}
	sh.top.Store(sh.byExpiry[0].deadline())
}

package lease

import (
	"container/list"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/shardlock"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// lruMoveEvery is how stale a key's place in its shard's LRU may be (µs).
const lruMoveEvery = int64(time.Second / time.Microsecond)

// shard is one lock's worth of tracked keys.
type shard struct {
	mu      sync.Mutex
	entries map[string]*entry
	lru     *list.List // of *entry; front = most recently seen
	// gen numbers the entries this shard created (entry.gen).
	gen uint64
	// leased is the entries holding a lease: what Sweep visits, a slice
	// (entry.slot is an entry's index + 1) because Sweep walks it once a
	// second and a map's iteration costs several times a slice's.
	leased []*entry
	// used is the leased entries a request used since the last sweep
	// (entry.used marks them): all that SweepUsed visits.
	used []*entry
	// counters change under mu, which the path holds anyway: a global
	// atomic would bounce one cache line between every core serving a hot
	// key. Stats sums them.
	counters counters
	_        [64]byte // keep neighbouring shards' hot fields apart
}

func (shd *shard) init() {
	shd.entries = make(map[string]*entry)
	shd.lru = list.New()
}

// counters are a shard's share of Stats.
type counters struct {
	blocks, refills, localHits, lapsed uint64
	outstanding                        int64
}

// lapse counts hits of leases that ended without a return.
func (c *counters) lapse(n uint64) {
	c.lapsed += n
	c.outstanding -= int64(n)
}

// lost counts a block taken for an entry that was no longer current when
// the answer came (forgotten, evicted, or started over under a new rule):
// it stays charged and is never used.
func (c *counters) lost(n uint64) {
	c.blocks++
	c.lapsed += n
}

func (s *Store) shardOf(key string) uint8 { return shardlock.Of(s.seed, key) }

// shardsOf appends the shard of every op (only Lease ops' are used) to idx.
func (s *Store) shardsOf(reqs []store.Request, idx []uint8) []uint8 {
	for i := range reqs {
		var sh uint8
		if reqs[i].Lease {
			sh = s.shardOf(reqs[i].Key)
		}
		idx = append(idx, sh)
	}
	return idx
}

// maskOf is the set of the Lease ops' shards.
func maskOf(reqs []store.Request, idx []uint8) shardlock.Set {
	var m shardlock.Set
	for i, sh := range idx {
		if reqs[i].Lease {
			m |= shardlock.Bit(sh)
		}
	}
	return m
}

func (s *Store) lock(set shardlock.Set)   { set.Each(func(i uint8) { s.shards[i].mu.Lock() }) }
func (s *Store) unlock(set shardlock.Set) { set.Each(func(i uint8) { s.shards[i].mu.Unlock() }) }

// addLeased puts e in the leased set, if it is not there.
func (shd *shard) addLeased(e *entry) {
	if e.slot == 0 {
		shd.leased = append(shd.leased, e)
		e.slot = len(shd.leased)
	}
}

// dropLeased takes e out of the leased set, if it is there: the last
// entry moves into its place (Sweep walks the set from its end, so the
// entry moved was already visited).
func (shd *shard) dropLeased(e *entry) {
	if e.slot == 0 {
		return
	}
	i, last := e.slot-1, len(shd.leased)-1
	moved := shd.leased[last]
	shd.leased[i], moved.slot = moved, i+1
	shd.leased[last] = nil
	shd.leased = shd.leased[:last]
	e.slot = 0
}

// newEntry starts tracking key under lim, with a generation of its own.
func (shd *shard) newEntry(key string, lim algorithms.Limit, now int64) *entry {
	shd.gen++
	return &entry{key: key, limit: lim, gen: shd.gen, rateStart: now, lruAt: now}
}

// touch returns key's entry, creating it (and dropping the shard's least
// recently seen one past the bound), with a lease that has ended dropped.
// A rule changed by reload starts the key over, as a new generation.
func (s *Store) touch(sh uint8, key string, lim algorithms.Limit, now int64) *entry {
	shd := &s.shards[sh]
	e := shd.entries[key]
	if e == nil {
		e = shd.newEntry(key, lim, now)
		e.el = shd.lru.PushFront(e)
		shd.entries[key] = e
		if s.perShard > 0 && shd.lru.Len() > s.perShard {
			old := shd.lru.Back().Value.(*entry)
			s.end(sh, old, now)
			shd.lru.Remove(old.el)
			delete(shd.entries, old.key)
		}
		return e
	}
	if now-e.lruAt >= lruMoveEvery || now < e.lruAt {
		// A hot key moves once a second, not at every hit: the move
		// writes to its neighbours' cache lines, and the order only picks
		// which key to forget past LEASE_MAX_KEYS.
		shd.lru.MoveToFront(e.el)
		e.lruAt = now
	}
	if e.limit != lim {
		s.end(sh, e, now)
		// It may still be in its shard's used list.
		el, lruAt, used := e.el, e.lruAt, e.used
		*e = *shd.newEntry(key, lim, now)
		e.el, e.lruAt, e.used = el, lruAt, used
		return e
	}
	if e.lease.kind != none && s.over(&e.lease, now) {
		s.end(sh, e, now)
	}
	return e
}

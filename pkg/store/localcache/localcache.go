// Package localcache is LOCAL_CACHE_SIZE_IN_BYTES: a store.Store decorator
// that remembers, per replica, keys known to be over their limit and
// answers a request for them without a backend round trip until the denial
// lifts (envoyproxy keeps a key a whole unit, which outlives a window that
// was already half over, and denies a bucket long after it has refilled).
//
// Answers stay exact: a cached answer is the one the backend would give,
// except that its durations are measured from before the round trip that
// learned them, so they run out that much early (never late), and that a
// change on another replica that gives the counter room again (a refund, a
// Cluster undo, a lease's return, a reset) reaches this one as a notice
// (Invalidate): one it misses is answered stale for at most WithMaxAge.
// Which denials are cached is in entry.go.
//
// A batch is answered from the cache only when every op in it has a live
// entry. A batch with any other op goes to the backend whole, still one
// round trip: the backend denies it as well (all-or-nothing), so nothing is
// charged, and the other ops get the backend's exact remaining counts,
// which the cache does not know. Reporting them without the backend would
// mean inventing those counts.
package localcache

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Store is the caching decorator. Use New.
type Store struct {
	// Decorator passes lending, returns and the counters API through.
	store.Decorator
	next     store.Store
	now      func() time.Time
	maxBytes int
	maxAge   time.Duration

	// gen counts invalidations (Invalidate, Flush), so that a backend
	// answer computed before one is not cached after it (see dropped).
	gen atomic.Uint64
	// dropped remembers the generation at which keys were invalidated
	// lately (guarded by mu).
	dropped recentDrops

	mu sync.Mutex
	// One entry per key, under the limit of its latest denial: an admission
	// under any limit changes the key's state, and drops it.
	entries map[string]*list.Element // of *entry; front = most recently used
	lru     *list.List
	bytes   int

	hits, misses, evictions atomic.Uint64
	// invalidated counts the keys Invalidate dropped or was told of.
	invalidated atomic.Uint64
	// lookups, accessed and the counts in it are the per-key figures
	// envoyproxy's cache reports (Gauges).
	lookups lookupCounts

	// watch, when set (WithInvalidations), runs from New until Close.
	watch     Watch
	stopWatch context.CancelFunc
	watching  sync.WaitGroup
}

// Watch delivers invalidations until ctx ends: it calls drop with keys
// whose cached denials another replica's refund may have lifted, and
// flush when it may have missed some (redisstore's WatchRefunds is one).
type Watch func(ctx context.Context, drop func(keys ...string), flush func()) error

var (
	_ store.Lender    = (*Store)(nil)
	_ store.Admin     = (*Store)(nil)
	_ store.Forgetter = (*Store)(nil)
)

// New wraps next with a cache of at most maxBytes (approximate: see
// entryOverhead). maxBytes <= 0 caches nothing.
func New(next store.Store, maxBytes int, opts ...Option) *Store {
	s := &Store{
		Decorator: store.Decorate(next),
		next:      next,
		now:       time.Now,
		maxBytes:  maxBytes,
		entries:   make(map[string]*list.Element),
		lru:       list.New(),
	}
	for _, opt := range opts {
		opt(s)
	}
	if s.watch != nil && maxBytes > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopWatch = cancel
		s.watching.Add(1)
		go func() {
			defer s.watching.Done()
			_ = s.watch(ctx, s.Invalidate, s.Flush)
		}()
	}
	return s
}

// Close stops the invalidations' watch and closes the wrapped store.
func (s *Store) Close() error {
	if s.stopWatch != nil {
		s.stopWatch()
		s.watching.Wait()
	}
	return s.next.Close()
}

// Take answers reqs from the cache when every one of them is a known
// denial, and otherwise from the backend, learning from its answer.
func (s *Store) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Read before the round trip: the backend decides later, so durations
	// measured from here end no later than the backend's.
	now := s.now()
	res, known, ok := s.answer(reqs, now)
	if ok {
		s.hits.Add(1)
		return res, nil
	}
	s.misses.Add(1)
	// An invalidation after this may describe a change the backend's
	// answer does not show yet: learn does not cache what it drops.
	gen := s.gen.Load()
	res, err := s.next.Take(ctx, reqs)
	if err != nil {
		return nil, err
	}
	markKnown(res, known)
	s.learn(reqs, res, now, gen)
	return res, nil
}

// learn records the backend's lasting denials and forgets the keys it has
// just charged, whose state changed. gen is the generation the backend was
// asked at: a denial of a key invalidated since is not recorded.
func (s *Store) learn(reqs []store.Request, res []store.Result, now time.Time, gen uint64) {
	if len(res) != len(reqs) || s.maxBytes <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	denied := store.VerdictOf(reqs, res).Denied()
	named := make(map[string]int, len(reqs))
	for _, r := range reqs {
		named[r.Key]++
	}
	for i, r := range reqs {
		d := res[i].Decision
		switch {
		case named[r.Key] > 1:
			// A later op on the key was decided against the earlier ops'
			// charges, which a denied batch never made: not a fact about
			// the stored state.
			if el, ok := s.entries[r.Key]; ok {
				s.remove(el)
			}
		case (d.Allowed && r.Hits > 0) || (r.Hits > 0 && (r.Usage || (r.Mode != algorithms.Enforce && !denied))):
			// Charged (usage, and shadow and quota ops of an admitted batch,
			// past their limits too), or (in a denied batch) chargeable:
			// either way the key is not what its entry says any more, and
			// a denial recorded past the limit says nothing about the hits
			// a later request brings.
			if el, ok := s.entries[r.Key]; ok {
				s.remove(el)
			}
		case !d.Allowed && !s.dropped.since(r.Key, gen):
			if e, ok := newEntry(cacheKey{r.Key, r.Limit}, r.Hits, d, now); ok {
				if s.maxAge > 0 {
					e.stale = now.Add(s.maxAge)
				}
				s.record(e, now)
			}
		}
	}
}

func (s *Store) record(e *entry, now time.Time) {
	if el, ok := s.entries[e.k.key]; ok {
		// An expired entry (not yet dropped) may be from an earlier window,
		// and one under another limit knows nothing about this one: replace
		// them rather than merge.
		old := el.Value.(*entry)
		used := old.used
		if old.live(now) && old.k == e.k {
			old.merge(e)
		} else {
			*old = *e
		}
		old.used = used
		s.lookups.overwrites++
		s.lru.MoveToFront(el)
		s.touch(old, now)
		return
	}
	size := e.size()
	if size > s.maxBytes {
		return
	}
	for s.bytes+size > s.maxBytes && s.lru.Len() > 0 {
		s.remove(s.lru.Back())
		s.evictions.Add(1)
	}
	s.entries[e.k.key] = s.lru.PushFront(e)
	s.bytes += size
	e.used = 0
	s.touch(e, now)
}

func (s *Store) remove(el *list.Element) {
	e := el.Value.(*entry)
	s.lru.Remove(el)
	delete(s.entries, e.k.key)
	s.bytes -= e.size()
	s.lookups.usedSum -= e.used
}

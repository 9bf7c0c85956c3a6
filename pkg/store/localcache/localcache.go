// Package localcache is LOCAL_CACHE_SIZE_IN_BYTES: a store.Store decorator
// that remembers, per replica, fixed-window keys known to be over their
// limit and answers a request for them without a backend round trip until
// the window ends (envoyproxy keeps them a whole unit, which outlives a
// window that was already half over).
//
// Answers stay exact. An entry records what the backend said when it denied
// h hits: the remaining count, the window end. Until then the same key under
// the same limit denies any hits >= h: the window's count only grows, so
// more hits cannot fit where fewer did not. Only fixed_window is cached:
// every other algorithm's remaining count grows continuously, so a cached
// answer would report a stale one. A batch is answered from the cache only
// when every op in it is such a denial; any other batch goes to the backend
// whole, keeping all-or-nothing and the backend's exact numbers, and its
// results refresh the entries (an admitted charge drops the key's entry).
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

// entryOverhead approximates the bytes an entry costs beyond its key: the
// map slot, the list element and the entry itself.
const entryOverhead = 160

// Store is the caching decorator. Use New.
type Store struct {
	next     store.Store
	now      func() time.Time
	maxBytes int

	mu      sync.Mutex
	entries map[cacheKey]*list.Element // of *entry; front = most recently used
	lru     *list.List
	bytes   int

	hits, misses, evictions atomic.Uint64
}

var _ store.Store = (*Store)(nil)

// cacheKey includes the whole limit, so a rule changed by hot reload never
// reads an entry made under the old rule.
type cacheKey struct {
	key   string
	limit algorithms.Limit
}

type entry struct {
	k         cacheKey
	minHits   uint64    // the fewest hits denied
	remaining uint64    // what the backend reported then
	until     time.Time // the window's end
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock (tests step a fake one); default time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New wraps next with a cache of at most maxBytes (approximate).
func New(next store.Store, maxBytes int, opts ...Option) *Store {
	s := &Store{
		next:     next,
		now:      time.Now,
		maxBytes: maxBytes,
		entries:  make(map[cacheKey]*list.Element),
		lru:      list.New(),
	}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Stats reports answers given from the cache, batches that went to the
// backend, and entries evicted to stay within the size.
func (s *Store) Stats() (hits, misses, evictions uint64) {
	return s.hits.Load(), s.misses.Load(), s.evictions.Load()
}

// Close closes the wrapped store.
func (s *Store) Close() error { return s.next.Close() }

// Take answers reqs from the cache when every one of them is a known
// denial, and otherwise from the backend, learning from its answer.
func (s *Store) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.now()
	if res, ok := s.answer(reqs, now); ok {
		s.hits.Add(1)
		return res, nil
	}
	s.misses.Add(1)
	res, err := s.next.Take(ctx, reqs)
	if err != nil {
		return nil, err
	}
	s.learn(reqs, res, now)
	return res, nil
}

func cacheable(r store.Request) bool {
	return r.Limit.Algorithm == algorithms.FixedWindow && r.Hits > 0 && r.Mode != algorithms.Shadow && r.Mode != algorithms.Quota
}

// answer returns the cached denials of reqs when all of them have one.
func (s *Store) answer(reqs []store.Request, now time.Time) ([]store.Result, bool) {
	if len(reqs) == 0 {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Result, len(reqs))
	seen := make(map[string]struct{}, len(reqs))
	for i, r := range reqs {
		if _, dup := seen[r.Key]; dup || !cacheable(r) {
			// A key named twice is charged twice in order: leave that to
			// the backend rather than replay it here.
			return nil, false
		}
		seen[r.Key] = struct{}{}
		el, ok := s.entries[cacheKey{r.Key, r.Limit}]
		if !ok {
			return nil, false
		}
		e := el.Value.(*entry)
		if !now.Before(e.until) {
			s.remove(el)
			return nil, false
		}
		if r.Hits < e.minHits {
			return nil, false
		}
		s.lru.MoveToFront(el)
		wait := e.until.Sub(now)
		out[i] = store.Result{
			Decision:  algorithms.Decision{Remaining: e.remaining, ResetAfter: wait, RetryAfter: wait},
			FromCache: true,
		}
		if r.Hits > r.Limit.Requests {
			out[i].RetryAfter = algorithms.Never
		}
	}
	return out, true
}

// learn records the backend's fixed-window denials and forgets keys it has
// just charged, whose remaining count changed.
func (s *Store) learn(reqs []store.Request, res []store.Result, now time.Time) {
	if len(res) != len(reqs) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	batchAllowed := true
	for i, r := range reqs {
		if !res[i].Allowed && r.Mode != algorithms.Shadow && r.Mode != algorithms.Quota {
			batchAllowed = false
		}
	}
	for i, r := range reqs {
		if r.Limit.Algorithm != algorithms.FixedWindow {
			continue
		}
		k := cacheKey{r.Key, r.Limit}
		d := res[i].Decision
		switch {
		case d.Allowed && r.Hits > 0 && batchAllowed:
			if el, ok := s.entries[k]; ok {
				s.remove(el)
			}
		case !d.Allowed && r.Hits > 0 && d.ResetAfter > 0:
			s.record(k, r.Hits, d, now)
		}
	}
}

func (s *Store) record(k cacheKey, hits uint64, d algorithms.Decision, now time.Time) {
	until := now.Add(d.ResetAfter)
	if el, ok := s.entries[k]; ok {
		e := el.Value.(*entry)
		e.minHits = min(e.minHits, hits)
		e.remaining, e.until = d.Remaining, until
		s.lru.MoveToFront(el)
		return
	}
	size := len(k.key) + entryOverhead
	if size > s.maxBytes {
		return
	}
	for s.bytes+size > s.maxBytes && s.lru.Len() > 0 {
		s.remove(s.lru.Back())
		s.evictions.Add(1)
	}
	s.entries[k] = s.lru.PushFront(&entry{k: k, minHits: hits, remaining: d.Remaining, until: until})
	s.bytes += size
}

func (s *Store) remove(el *list.Element) {
	e := el.Value.(*entry)
	s.lru.Remove(el)
	delete(s.entries, e.k)
	s.bytes -= len(e.k.key) + entryOverhead
}

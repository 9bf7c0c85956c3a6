package localcache

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Gauges are the cache's figures under the meaning envoyproxy's local cache
// (freecache) gives them, which it exports as ratelimit.localcache.*: per
// key looked up, not per request.
type Gauges struct {
	// HitCount: ops whose key held a live denial that decided them;
	// MissCount: the other ops looked up; LookupCount: both.
	HitCount, MissCount, LookupCount uint64
	// EntryCount: entries held, expired ones not yet dropped included.
	EntryCount uint64
	// EvacuateCount: entries evicted to stay within the size.
	EvacuateCount uint64
	// ExpiredCount: entries found expired (their denial lifted) and dropped.
	ExpiredCount uint64
	// OverwriteCount: denials recorded over an entry the key already had.
	OverwriteCount uint64
	// AverageAccessTime: the mean Unix time, in seconds, of the entries'
	// last use (recorded or answered from); 0 when empty.
	AverageAccessTime int64
}

// lookupCounts are Gauges' counts, guarded by Store.mu.
type lookupCounts struct {
	hits, misses, expired, overwrites uint64
	// usedSum is the sum of the entries' entry.used.
	usedSum int64
}

func (c *lookupCounts) count(hit bool) {
	if hit {
		c.hits++
	} else {
		c.misses++
	}
}

// touch marks e used at now.
func (s *Store) touch(e *entry, now time.Time) {
	t := now.Unix()
	s.lookups.usedSum += t - e.used
	e.used = t
}

// Stats reports batches answered from the cache, batches that went to the
// backend, and entries evicted to stay within the size.
func (s *Store) Stats() (hits, misses, evictions uint64) {
	return s.hits.Load(), s.misses.Load(), s.evictions.Load()
}

// Invalidated reports how many keys Invalidate (and Forget) were given.
func (s *Store) Invalidated() uint64 { return s.invalidated.Load() }

// Len reports how many entries the cache holds and their approximate bytes.
func (s *Store) Len() (entries, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len(), s.bytes
}

// Gauges reports the cache's figures as envoyproxy's cache does.
func (s *Store) Gauges() Gauges {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := Gauges{
		HitCount:       s.lookups.hits,
		MissCount:      s.lookups.misses,
		LookupCount:    s.lookups.hits + s.lookups.misses,
		EntryCount:     uint64(s.lru.Len()),
		EvacuateCount:  s.evictions.Load(),
		ExpiredCount:   s.lookups.expired,
		OverwriteCount: s.lookups.overwrites,
	}
	if n := s.lru.Len(); n > 0 {
		g.AverageAccessTime = s.lookups.usedSum / int64(n)
	}
	return g
}

// setKnown marks op i in known, allocating it for n ops when nil.
func setKnown(known []bool, n, i int) []bool {
	if known == nil {
		known = make([]bool, n)
	}
	known[i] = true
	return known
}

// markKnown flags the backend's denials of the ops whose denial the cache
// held (store.Result.CachedDenial).
func markKnown(res []store.Result, known []bool) {
	for i, k := range known {
		if k && i < len(res) && !res[i].Allowed {
			res[i].CachedDenial = true
		}
	}
}

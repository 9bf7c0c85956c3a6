package localcache

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// answer returns the cached denials of reqs when all of them have one.
// Otherwise it reports in known (nil when none) which ops had a cached
// denial all the same: the backend is asked for the whole batch, and a
// denial it confirms was known here too. Every op counts as a lookup,
// a hit when its denial is cached (Gauges).
func (s *Store) answer(reqs []store.Request, now time.Time) (out []store.Result, known []bool, ok bool) {
	if len(reqs) == 0 {
		return nil, nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := true
	for i := range reqs {
		d, hit := s.lookup(reqs, i, now)
		s.lookups.count(hit)
		switch {
		case !hit:
			all = false
		case all:
			// Most requests miss: allocate once every op so far was a hit.
			if out == nil {
				out = make([]store.Result, len(reqs))
			}
			out[i] = store.Result{Decision: d, FromCache: true}
		default:
			known = setKnown(known, len(reqs), i)
		}
	}
	if all {
		return out, nil, true
	}
	for i := range out {
		if out[i].FromCache {
			known = setKnown(known, len(reqs), i)
		}
	}
	return nil, known, false
}

// lookup is the cached decision of reqs[i], if its key holds a live denial
// that decides it.
func (s *Store) lookup(reqs []store.Request, i int, now time.Time) (algorithms.Decision, bool) {
	r := reqs[i]
	if r.Usage || (r.Mode != 0 && r.Mode != algorithms.Enforce) || store.NamedBefore(reqs, i) {
		// Usage and refunds are recorded whatever the answer, a key
		// named twice is charged twice in order, and a shadow, quota
		// or spare denial does not decide the batch: the backend's job.
		return algorithms.Decision{}, false
	}
	el, ok := s.entries[r.Key]
	if !ok {
		return algorithms.Decision{}, false
	}
	e := el.Value.(*entry)
	if !e.live(now) {
		s.remove(el)
		s.lookups.expired++
		return algorithms.Decision{}, false
	}
	if e.k.limit != r.Limit {
		// A rule changed by hot reload: the denial was under another.
		return algorithms.Decision{}, false
	}
	d, ok := e.decide(r.Hits, now)
	if !ok {
		return algorithms.Decision{}, false
	}
	s.lru.MoveToFront(el)
	s.touch(e, now)
	return d, true
}

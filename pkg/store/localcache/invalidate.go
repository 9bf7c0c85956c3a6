package localcache

// Forget drops keys' entries, for a counter reset: a cached denial would
// otherwise outlive the counter it describes on this replica.
func (s *Store) Forget(keys ...string) {
	s.Invalidate(keys...)
	s.Decorator.Forget(keys...)
}

// Invalidate drops keys' entries: a replica gave them room again (a refund
// of a counter with nothing left, a Cluster undo, a lease's return, a reset:
// each is published to every replica; see redisstore's WatchRefunds). A
// backend answer already on its way when Invalidate runs is not cached
// either, whichever arrives first.
func (s *Store) Invalidate(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gen.Add(1)
	s.invalidated.Add(uint64(len(keys)))
	for _, k := range keys {
		if el, ok := s.entries[k]; ok {
			s.remove(el)
		}
		s.dropped.add(k, g)
	}
}

// Flush drops every entry, and keeps any backend answer already on its way
// from being cached: what the source of invalidations calls when it may
// have missed some (a subscription (re)established).
func (s *Store) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.lru.Len() > 0 {
		s.remove(s.lru.Back())
	}
	s.dropped.forgetBefore(s.gen.Add(1) + 1)
}

package lease

import (
	"slices"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Forget drops what the replica holds of keys: their leases (the unused
// hits lapse, as their charges go with the keys), the unused hits of their
// ended leases waiting to be given back, and the backend's last answers.
// A block of them in flight is not installed when it comes back: the entry
// it was taken for is gone (entry.gen). Forget returns once no Return that
// may carry a charge of them is in flight, so that none reaches the backend
// after it: a charge given back to a reset counter would free hits it never
// counted.
//
// The counters API calls it before and after a reset deletes the keys in
// the backend: a block kept past that would admit hits no counter holds.
// Other replicas keep their blocks until they end (see docs/leases.md).
func (s *Store) Forget(keys ...string) {
	now := s.now().UnixMicro()
	for _, key := range keys {
		sh := s.shardOf(key)
		shd := &s.shards[sh]
		shd.mu.Lock()
		if e := shd.entries[key]; e != nil {
			// A window's unused hits would otherwise be given back:
			// they lapse instead (endInto already lapsed anything else).
			if ch, ok := s.endInto(sh, e, now); ok {
				shd.counters.lapsed += ch.Applied
			}
			shd.lru.Remove(e.el)
			delete(shd.entries, key)
		}
		shd.mu.Unlock()
	}
	s.dropPending(keys)
	// Wait out any sweep or ReturnAll that gathered charges before the
	// keys were dropped.
	s.giving.Lock()
	s.giving.Unlock()
	s.Decorator.Forget(keys...)
}

// dropPending drops the pending charges of keys; their hits lapse.
func (s *Store) dropPending(keys []string) {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	var lapsed uint64
	s.pending = slices.DeleteFunc(s.pending, func(ch store.Charge) bool {
		if slices.Contains(keys, ch.Key) {
			lapsed += ch.Applied
			return true
		}
		return false
	})
	s.returnLapsed.Add(lapsed)
}

package lease

// Forget drops what the replica holds of keys: their leases (the unused
// hits lapse, as their charges went with the keys) and the backend's last
// answers. The counters API calls it around a reset, which deletes the keys
// in the backend: a block kept past that would admit hits no counter holds.
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
				shd.counters.lapsed += ch.Hits
			}
			shd.lru.Remove(e.el)
			delete(shd.entries, key)
		}
		shd.mu.Unlock()
	}
}

package lease

// Room is the hits key's lease can admit now (0 without one), for tests.
func (s *Store) Room(key string) uint64 {
	shd := &s.shards[s.shardOf(key)]
	shd.mu.Lock()
	defer shd.mu.Unlock()
	e := shd.entries[key]
	if e == nil {
		return 0
	}
	return e.lease.room(s.now().UnixMicro())
}

// Tracked is how many keys the store tracks, for tests.
func (s *Store) Tracked() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += len(s.shards[i].entries)
		s.shards[i].mu.Unlock()
	}
	return n
}

// Sweeping reports whether the store started its sweeper, for tests.
func (s *Store) Sweeping() bool { return s.started.Load() }

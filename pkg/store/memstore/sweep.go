package memstore

import (
	"runtime/debug"
	"time"
)

// sweepBatch is how many expired entries one lock hold drops: small enough
// that a request waiting for the shard waits tens of microseconds, large
// enough to amortise the lock.
const sweepBatch = 128

// freeAfter is how many released map slots make the sweeper hand memory
// back to the OS once the store is idle, and freeEvery how often it may do
// so at most. Only when idle: returning memory forces a collection and
// holds the heap lock while it scavenges, a stall no request should see.
const (
	freeAfter = 1 << 16
	freeEvery = 30 * time.Second
)

// sweeper is the background expiry's progress between passes.
type sweeper struct {
	next      int // shard the next pass starts at
	released  int // map slots released since memory was last freed
	lastFree  time.Time
	lastTakes uint64 // Store.takes at the previous pass, to tell idleness
}

func (s *Store) sweepLoop() {
	defer close(s.stopped)
	t := time.NewTicker(s.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweepMu.Lock()
			s.sweep(s.sweepBudget)
			s.sweepMu.Unlock()
		}
	}
}

// Sweep drops every expired state and compacts shards that shrank, without
// a time budget. The background sweeper does the same in bounded passes;
// Sweep is for tests and for callers that want it done now.
func (s *Store) Sweep() {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	s.sweep(0)
}

// sweep visits the shards round robin from where the last pass stopped,
// dropping expired states a batch per lock hold, until every shard is clean
// or budget (0: none) is spent. It reports whether it finished.
func (s *Store) sweep(budget time.Duration) bool {
	start := time.Now()
	nowMicro := s.now().UnixMicro()
	for visited := 0; visited < numShards; visited++ {
		i := (s.sweeper.next + visited) % numShards
		sh := &s.shards[i]
		for {
			if s.closed.Load() {
				return true
			}
			sh.mu.Lock()
			n := sh.dropExpired(nowMicro, sweepBatch)
			if n < sweepBatch {
				s.sweeper.released += sh.compact()
			}
			sh.mu.Unlock()
			if n > 0 {
				s.keys.Add(-int64(n))
				s.expired.Add(uint64(n))
			}
			if budget > 0 && time.Since(start) >= budget {
				s.sweeper.next = i
				return false
			}
			if n < sweepBatch {
				break
			}
		}
	}
	s.sweeper.next = 0
	takes := s.takes.Load()
	idle := takes == s.sweeper.lastTakes
	s.sweeper.lastTakes = takes
	if idle && s.sweeper.released >= freeAfter && time.Since(s.sweeper.lastFree) >= freeEvery {
		s.freeHook()
		s.sweeper.released, s.sweeper.lastFree = 0, time.Now()
	}
	return true
}

// freeOSMemory returns the freed maps to the OS now: otherwise an idle
// process keeps them until its next forced GC and the scavenger's pace.
func freeOSMemory() { debug.FreeOSMemory() }

package shardlock_test

import (
	"hash/maphash"
	"sync"
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/shardlock"
)

type shard struct {
	mu   sync.Mutex
	held bool
}

func (s *shard) Lock()   { s.mu.Lock(); s.held = true }
func (s *shard) Unlock() { s.held = false; s.mu.Unlock() }

// Lock takes exactly the shards of the set and Unlock gives them back.
func TestLockTakesTheSet(t *testing.T) {
	var shards [shardlock.N]shard
	set := shardlock.Bit(0) | shardlock.Bit(7) | shardlock.Bit(63)
	shardlock.Lock(&shards, set)
	for i := range shards {
		want := set&shardlock.Bit(uint8(i)) != 0
		if shards[i].held != want {
			t.Fatalf("shard %d held = %v, want %v", i, shards[i].held, want)
		}
	}
	shardlock.Unlock(&shards, set)
	for i := range shards {
		if shards[i].held || !shards[i].mu.TryLock() {
			t.Fatalf("shard %d still held after Unlock", i)
		}
	}
}

// Batches over overlapping sets, each locking in index order, never
// deadlock (the test would hang), and a key's shard is stable and in range.
func TestOverlappingSets(t *testing.T) {
	var shards [shardlock.N]shard
	seed := maphash.MakeSeed()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				a := shardlock.Of(seed, string(rune('a'+g)))
				b := shardlock.Of(seed, string(rune('a'+(g+i)%26)))
				if a >= shardlock.N || a != shardlock.Of(seed, string(rune('a'+g))) {
					t.Errorf("shard %d of one key moved or is out of range", a)
					return
				}
				set := shardlock.Bit(a) | shardlock.Bit(b) | shardlock.Bit(uint8(i%shardlock.N))
				shardlock.Lock(&shards, set)
				shardlock.Unlock(&shards, set)
			}
		})
	}
	wg.Wait()
}

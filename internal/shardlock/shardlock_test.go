package shardlock_test

import (
	"hash/maphash"
	"slices"
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

func lock(shards *[shardlock.N]shard, set shardlock.Set) {
	set.Each(func(i uint8) { shards[i].Lock() })
}

func unlock(shards *[shardlock.N]shard, set shardlock.Set) {
	set.Each(func(i uint8) { shards[i].Unlock() })
}

// Each visits exactly the shards of the set, in ascending order: locking
// with it takes exactly them, and unlocking gives them back.
func TestLockTakesTheSet(t *testing.T) {
	var shards [shardlock.N]shard
	set := shardlock.Bit(0) | shardlock.Bit(7) | shardlock.Bit(63)
	var order []uint8
	set.Each(func(i uint8) { order = append(order, i) })
	if !slices.Equal(order, []uint8{0, 7, 63}) {
		t.Fatalf("Each visits %v, want [0 7 63]", order)
	}
	lock(&shards, set)
	for i := range shards {
		want := set&shardlock.Bit(uint8(i)) != 0
		if shards[i].held != want {
			t.Fatalf("shard %d held = %v, want %v", i, shards[i].held, want)
		}
	}
	unlock(&shards, set)
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
				lock(&shards, set)
				unlock(&shards, set)
			}
		})
	}
	wg.Wait()
}

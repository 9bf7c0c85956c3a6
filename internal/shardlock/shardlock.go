// Package shardlock is the lock striping the in-process stores share
// (pkg/store/memstore, pkg/store/lease): N shards, a key's shard a seeded
// hash of it, and the shards a batch touches one Set, locked in index
// order so that two batches over several shards never deadlock.
package shardlock

import (
	"hash/maphash"
	"math/bits"
)

// N is the number of shards: 64, so that a Set of them is one uint64.
const N = 64

// Of is key's shard under seed.
func Of(seed maphash.Seed, key string) uint8 {
	return uint8(maphash.String(seed, key) % N)
}

// Set is a set of shards, bit i for shard i.
type Set uint64

// Bit is the set of shard i alone.
func Bit(i uint8) Set { return 1 << i }

// Shard is what a store keeps per shard: a pointer to it locks it.
type Shard[S any] interface {
	*S
	Lock()
	Unlock()
}

// Lock locks the shards of set, in index order.
func Lock[S any, P Shard[S]](shards *[N]S, set Set) {
	for m := uint64(set); m != 0; m &= m - 1 {
		P(&shards[bits.TrailingZeros64(m)]).Lock()
	}
}

// Unlock unlocks the shards of set.
func Unlock[S any, P Shard[S]](shards *[N]S, set Set) {
	for m := uint64(set); m != 0; m &= m - 1 {
		P(&shards[bits.TrailingZeros64(m)]).Unlock()
	}
}

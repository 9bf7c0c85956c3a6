// Package shardlock is the lock striping the in-process stores share
// (pkg/store/memstore, pkg/store/lease): N shards, a key's shard a seeded
// hash of it, and the shards a batch touches one Set, locked in index
// order (Each's) so that two batches over several shards never deadlock.
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

// Each calls f with every shard of s in ascending index order, the one
// order every batch locks its shards in: a store locks a Set with
// set.Each(func(i uint8) { shards[i].mu.Lock() }). Each and such a literal
// inline into the caller, so the lock calls are direct, as a generic
// helper calling a Lock method through its type's dictionary is not.
func (s Set) Each(f func(i uint8)) {
	for m := uint64(s); m != 0; m &= m - 1 {
		f(uint8(bits.TrailingZeros64(m)))
	}
}

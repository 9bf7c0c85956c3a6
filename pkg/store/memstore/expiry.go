package memstore

import (
	"math"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// entry is one key's state and its place in the expiry heap.
type entry struct {
	key   string
	state algorithms.State
	index int
}

// deadline orders entries by expiry; a state without one never expires and
// sorts last, so it is evicted only when nothing else is left.
func (e *entry) deadline() int64 {
	if e.state.ExpiresAt == 0 {
		return math.MaxInt64
	}
	return e.state.ExpiresAt
}

// expiryHeap is a min-heap of one shard's entries by deadline
// (container/heap). It serves the sweeper, which pops expired states from
// its top, and shed, which finds the eviction victim there.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].deadline() < h[j].deadline() }

func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *expiryHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.index = -1
	*h = old[:n-1]
	return e
}

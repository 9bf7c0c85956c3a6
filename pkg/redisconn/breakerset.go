package redisconn

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// BreakerSet gathers the breakers of the clients built from a Config whose
// Breakers it is, for metrics.
type BreakerSet struct {
	mu       sync.Mutex
	breakers []*breaker
}

// BreakerState is one node's breaker as metrics show it.
type BreakerState struct {
	Node string
	Open bool
	// Refused counts the calls answered at once while the breaker was open.
	Refused uint64
}

// NewBreakerSet returns an empty set.
func NewBreakerSet() *BreakerSet { return &BreakerSet{} }

// States reports every node's breaker, one per node address, sorted by it.
// A node whose client go-redis replaced (a Cluster node that left and came
// back) has its breakers merged: open if any is, refusals summed.
func (s *BreakerSet) States() []BreakerState {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []BreakerState
	for _, b := range s.breakers {
		st := BreakerState{Node: b.node, Open: b.open.Load(), Refused: b.refused.Load()}
		i, found := slices.BinarySearchFunc(out, st.Node, func(e BreakerState, n string) int { return strings.Compare(e.Node, n) })
		if found {
			out[i].Open = out[i].Open || st.Open
			out[i].Refused += st.Refused
			continue
		}
		out = slices.Insert(out, i, st)
	}
	return out
}

func (s *BreakerSet) add(b *breaker) {
	s.mu.Lock()
	s.breakers = append(s.breakers, b)
	s.mu.Unlock()
}

// remove forgets b but keeps its refusals, so the counter never goes back.
func (s *BreakerSet) remove(b *breaker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.breakers, b)
	if i < 0 {
		return
	}
	s.breakers = slices.Delete(s.breakers, i, i+1)
	if n := b.refused.Load(); n > 0 {
		keep := &breaker{node: b.node}
		keep.refused.Store(n)
		s.breakers = append(s.breakers, keep)
	}
}

// guard installs a breaker on every node client of c (one on a plain or
// Sentinel client, one per node on a Cluster client, as go-redis creates
// it) before any other hook, so an open breaker answers before a call
// queues for a pipeline. It returns what stops their probes.
func guard(c redis.UniversalClient, s Config) (stop func()) {
	if s.BreakerThreshold <= 0 {
		return func() {}
	}
	set := s.Breakers
	if set == nil {
		set = NewBreakerSet()
	}
	var mu sync.Mutex
	var installed []*breaker
	install := func(node *redis.Client, name string) {
		b := newBreaker(node, name, s)
		b.gone = set.remove
		set.add(b)
		node.AddHook(b)
		mu.Lock()
		installed = append(installed, b)
		mu.Unlock()
	}
	switch c := c.(type) {
	case *redis.Client:
		name := c.Options().Addr
		if s.Type == Sentinel {
			name, _, _ = strings.Cut(s.Addr, ",")
			name = "sentinel:" + strings.TrimSpace(name)
		}
		install(c, name)
	case *redis.ClusterClient:
		c.OnNewNode(func(node *redis.Client) { install(node, node.Options().Addr) })
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range installed {
			b.stop()
		}
	}
}

func newBreaker(node *redis.Client, name string, s Config) *breaker {
	interval := s.BreakerProbeInterval
	if interval <= 0 {
		interval = DefaultBreakerProbeInterval
	}
	return &breaker{
		node:      name,
		threshold: int32(min(s.BreakerThreshold, 1<<30)),
		interval:  interval,
		timeout:   min(s.Timeout, maxProbeTimeout),
		ping:      func(ctx context.Context) error { return node.Ping(ctx).Err() },
		changed:   s.OnBreakerChange,
		done:      make(chan struct{}),
	}
}

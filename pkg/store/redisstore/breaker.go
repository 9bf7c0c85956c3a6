package redisstore

import (
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redisconn"
)

// Defaults of REDIS_BREAKER_THRESHOLD and REDIS_BREAKER_PROBE_INTERVAL (as
// internal/redisconn's, which builds the breakers).
const (
	DefaultBreakerThreshold     = 3
	DefaultBreakerProbeInterval = 100 * time.Millisecond
)

// ErrBreakerOpen is what a call gets, at once, while its node's breaker is
// open: the node failed several calls in a row in a way that certainly ran
// nothing, and has not answered a probe since. Test for it with errors.Is.
var ErrBreakerOpen = redisconn.ErrBreakerOpen

// WithBreaker is REDIS_BREAKER_THRESHOLD and REDIS_BREAKER_PROBE_INTERVAL:
// after threshold consecutive calls to one node failed in a way that
// certainly ran nothing (dial refused, CLUSTERDOWN, LOADING, MASTERDOWN),
// calls to that node fail at once, and a PING every probeInterval closes the
// breaker when the node answers. threshold 0 turns breakers off.
func WithBreaker(threshold int, probeInterval time.Duration) Option {
	return func(s *settings) { s.conn.BreakerThreshold, s.conn.BreakerProbeInterval = threshold, probeInterval }
}

// BreakerSet gathers the breakers of the clients built with
// WithBreakerSet, for metrics. Its zero value is not usable; use
// NewBreakerSet.
type BreakerSet struct{ set *redisconn.BreakerSet }

// BreakerState is one node's breaker as metrics show it.
type BreakerState struct {
	Node string
	Open bool
	// Refused counts the calls answered at once while the breaker was open.
	Refused uint64
}

// NewBreakerSet returns an empty set.
func NewBreakerSet() *BreakerSet { return &BreakerSet{set: redisconn.NewBreakerSet()} }

// WithBreakerSet registers the breakers of the client New builds in set,
// whose States then report them.
func WithBreakerSet(set *BreakerSet) Option {
	return func(s *settings) {
		s.conn.Breakers = nil
		if set != nil {
			s.conn.Breakers = set.set
		}
	}
}

// States reports every node's breaker, one per node address, sorted by it.
// A node whose client go-redis replaced (a Cluster node that left and came
// back) has its breakers merged: open if any is, refusals summed.
func (s *BreakerSet) States() []BreakerState {
	if s == nil || s.set == nil {
		return nil
	}
	states := s.set.States()
	if states == nil {
		return nil
	}
	out := make([]BreakerState, len(states))
	for i, st := range states {
		out[i] = BreakerState(st)
	}
	return out
}

package redisstore

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/redisconn"
)

// Defaults of REDIS_BREAKER_THRESHOLD and REDIS_BREAKER_PROBE_INTERVAL.
const (
	DefaultBreakerThreshold     = redisconn.DefaultBreakerThreshold
	DefaultBreakerProbeInterval = redisconn.DefaultBreakerProbeInterval
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

// WithBreakerChange is told once each time a node's breaker opens (open
// true) or its probe closes it: for a log line per change.
func WithBreakerChange(fn func(node string, open bool)) Option {
	return func(s *settings) { s.conn.OnBreakerChange = fn }
}

// BreakerSet gathers the breakers of the clients built with
// WithBreakerSet, for metrics; its States report them, one per node
// address, sorted by it.
type BreakerSet = redisconn.BreakerSet

// BreakerState is one node's breaker as metrics show it.
type BreakerState = redisconn.BreakerState

// NewBreakerSet returns an empty set.
func NewBreakerSet() *BreakerSet { return redisconn.NewBreakerSet() }

// WithBreakerSet registers the breakers of the client New builds in set,
// whose States then report them.
func WithBreakerSet(set *BreakerSet) Option {
	return func(s *settings) { s.conn.Breakers = set }
}

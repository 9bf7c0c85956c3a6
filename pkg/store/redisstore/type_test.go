package redisstore

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/redisconn"
)

// TestTypeIsRedisconns: WithType converts a Type to the connection
// package's by value, so each constant must name the same deployment there;
// the documented defaults must be the ones the settings start from.
func TestTypeIsRedisconns(t *testing.T) {
	for _, tc := range []struct {
		ours   Type
		theirs redisconn.Type
	}{{Single, redisconn.Single}, {Sentinel, redisconn.Sentinel}, {Cluster, redisconn.Cluster}} {
		if redisconn.Type(tc.ours) != tc.theirs || tc.ours.String() != tc.theirs.String() {
			t.Errorf("%v is %v in redisconn, want %v", tc.ours, redisconn.Type(tc.ours), tc.theirs)
		}
	}
	if DefaultTimeout != redisconn.DefaultTimeout || DefaultPoolSize != redisconn.DefaultPoolSize {
		t.Errorf("defaults %s and %d, redisconn's %s and %d", DefaultTimeout, DefaultPoolSize, redisconn.DefaultTimeout, redisconn.DefaultPoolSize)
	}
	if DefaultBreakerThreshold != redisconn.DefaultBreakerThreshold || DefaultBreakerProbeInterval != redisconn.DefaultBreakerProbeInterval {
		t.Errorf("breaker defaults %d and %s, redisconn's %d and %s", DefaultBreakerThreshold, DefaultBreakerProbeInterval,
			redisconn.DefaultBreakerThreshold, redisconn.DefaultBreakerProbeInterval)
	}
	if s := defaults(); s.conn.BreakerThreshold != DefaultBreakerThreshold || s.conn.BreakerProbeInterval != DefaultBreakerProbeInterval {
		t.Errorf("settings start with breaker %d and %s, want the documented defaults", s.conn.BreakerThreshold, s.conn.BreakerProbeInterval)
	}
}

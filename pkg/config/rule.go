package config

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Entry is one (key, value) pair of a request descriptor.
type Entry struct {
	Key   string
	Value string
}

// Rule is the rate_limit of one descriptor node, resolved for matching.
type Rule struct {
	// Domain the rule belongs to.
	Domain string
	// StatKey is envoyproxy's stats key for the node:
	// domain.key_value.key2 (key alone where the node has no value).
	StatKey string
	// Name is rate_limit.name; Replaces lists the names this rule replaces.
	Name     string
	Replaces []string
	// Unit and RequestsPerUnit are echoed in current_limit.
	Unit            rlsv3.RateLimitResponse_RateLimit_Unit
	RequestsPerUnit uint32
	// Limit is what the store enforces (algorithm, period, burst, ...).
	Limit          algorithms.Limit
	Unlimited      bool
	ShadowMode     bool
	DetailedMetric bool
}

package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/ratelimitd/ratelimitd/internal/yamldoc"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// leaseRefused says why a limit cannot lease: the field to blame (empty
// for the whole block) and the reason.
type leaseRefused struct {
	field, reason string
}

// leaseRefusal is nil when lim can lease (lease.Leasable), and
// else names what prevents it, for the loader's error.
func leaseRefusal(lim algorithms.Limit) *leaseRefused {
	switch {
	case lease.Leasable(lim):
		return nil
	case lim.Validate() != nil:
		return &leaseRefused{"", "an invalid limit cannot lease"}
	case lim.Requests == 0:
		return &leaseRefused{"requests_per_unit", "a zero limit cannot lease: it admits nothing to lease"}
	case lim.Algorithm == algorithms.SlidingLog:
		return &leaseRefused{"algorithm", "sliding_log cannot lease: it logs each hit at its admission time, and a hit admitted later from a block would leave the log early"}
	case lim.RefillInterval != 0:
		return &leaseRefused{"refill_interval", "a token_bucket with refill_interval cannot lease: stepped refills are not a continuous bucket whose emission slots can be reserved ahead"}
	case lim.MaxDebt != 0:
		return &leaseRefused{"max_debt", "a token_bucket with max_debt cannot lease: debt is not a continuous bucket whose emission slots can be reserved ahead"}
	case lim.Calendar && lim.Algorithm.Info().ResetLag > 0:
		return &leaseRefused{"", "a " + lim.Algorithm.String() + " of calendar months cannot lease: a block ends a window before the reset its replica is told, and calendar months differ in length"}
	}
	return &leaseRefused{"algorithm", lim.Algorithm.String() + " cannot lease"}
}

// checkLease refuses lease: true (at leaseKey) on a limit that cannot lease,
// pointing at the field that prevents it. It runs on each limit of a
// descriptor, so every limit of rate_limits is checked.
func (r *reader) checkLease(b *rateLimitBlock, leaseKey *yaml.Node) {
	if leaseKey == nil || !b.valid {
		return
	}
	refused := leaseRefusal(b.rule.Limit)
	if b.rule.Unlimited {
		refused = &leaseRefused{"unlimited", "an unlimited rule cannot lease: it never reaches the store"}
	}
	if refused == nil {
		return
	}
	at, field := b.at, b.field
	if key := b.keys[refused.field]; key != nil {
		at, field = key, yamldoc.Join(b.field, refused.field)
	}
	r.errorf(at, field, "%s (lease: true at line %d; set lease: false or change the limit)", refused.reason, leaseKey.Line)
	b.valid = false
}

// Leases reports whether any rule of c can lease when LEASE_ENABLED is off
// (lease: true): whether the store needs the lease decorator for c.
func (c *Config) Leases() bool {
	if c == nil {
		return false
	}
	for _, tree := range c.domains {
		if leases(tree.root) {
			return true
		}
	}
	return false
}

func leases(n *node) bool {
	if n.rule != nil && n.rule.Leases(false) {
		return true
	}
	for _, c := range n.children {
		if leases(c) {
			return true
		}
	}
	return false
}

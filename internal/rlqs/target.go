package rlqs

import (
	"slices"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// kind is what a bucket is assigned, decided by the rule it matches.
type kind uint8

const (
	// kindAllow: no rule (or the domain is not configured), or an
	// unlimited rule: ALLOW_ALL, as the rate limit service answers OK.
	kindAllow kind = iota + 1
	// kindDeny: a limit of zero requests: DENY_ALL.
	kindDeny
	// kindShadow: shadow_mode (or SHADOW_MODE): ALLOW_ALL, and the
	// requests Envoy reports allowed are counted.
	kindShadow
	// kindGrants: window limits: each Envoy gets token buckets whose every
	// token was charged in the counters first (a grant, see window).
	kindGrants
	// kindUnserved: limits whose hits cannot be handed out exactly (a
	// bucket algorithm, sliding_log, lease: false): no assignment, Envoy
	// keeps its no_assignment_behavior.
	kindUnserved
)

func (k kind) String() string {
	switch k {
	case kindAllow:
		return "allow"
	case kindDeny:
		return "deny"
	case kindShadow:
		return "shadow"
	case kindGrants:
		return "grants"
	default:
		return "unserved"
	}
}

// counter is one store counter a bucket's rule charges.
type counter struct {
	key   string
	limit algorithms.Limit
}

// target is what a bucket maps to under one config.
type target struct {
	kind     kind
	rule     *config.Rule
	counters []counter // kindGrants and kindShadow
	onError  config.StoreErrorAction
}

// same reports whether t and u are served alike (kind, counters, limits):
// a reload that leaves a bucket's target the same keeps its ledger.
func (t target) same(u target) bool {
	return t.kind == u.kind && t.onError == u.onError && slices.Equal(t.counters, u.counters)
}

// resolve maps a bucket id to its target: the rule MatchBucket finds, its
// counters named as the rate limit service names them.
func resolve(cfg *config.Config, domain string, id map[string]string, kb config.KeyBuilder, shadow bool) target {
	if cfg == nil {
		// No valid configuration yet (FORCE_START_WITHOUT_INITIAL_CONFIG):
		// nothing to assign, as the rate limit service answers UNAVAILABLE.
		return target{kind: kindUnserved}
	}
	rule, entries := cfg.MatchBucket(domain, id)
	t := target{rule: rule, kind: classify(rule, shadow)}
	if t.kind == kindGrants || t.kind == kindShadow {
		for _, r := range rule.Limits() {
			t.counters = append(t.counters, counter{key: kb.Key(r, entries), limit: r.Limit})
		}
		t.onError = storeErrorAction(rule.Limits())
	}
	return t
}

// classify says how a bucket on rule is served.
func classify(rule *config.Rule, shadow bool) kind {
	if rule == nil || rule.Unlimited {
		return kindAllow
	}
	if shadow || rule.ShadowMode {
		return kindShadow
	}
	limits := rule.Limits()
	for _, r := range limits {
		if r.Limit.Requests == 0 {
			return kindDeny
		}
	}
	for _, r := range limits {
		if r.Lease == config.LeaseOff || !r.Limit.Algorithm.Info().WindowLease || !lease.Leasable(r.Limit) {
			return kindUnserved
		}
	}
	return kindGrants
}

// storeErrorAction is the answer of limits together when the store cannot
// decide, as the rate limit service combines them: all allow, allow; any
// deny, deny; otherwise unavailable. A grant is never decided locally, so
// local counts as unavailable: Envoy's own fallback decides.
func storeErrorAction(limits []*config.Rule) config.StoreErrorAction {
	all := config.StoreErrorAllow
	for _, r := range limits {
		switch r.OnStoreError {
		case config.StoreErrorDeny:
			return config.StoreErrorDeny
		case config.StoreErrorUnavailable, config.StoreErrorLocal:
			all = config.StoreErrorUnavailable
		}
	}
	return all
}

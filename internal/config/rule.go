package config

import (
	"fmt"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
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
	// It is the zero Limit for unlimited rules, which never reach a store.
	Limit          algorithms.Limit
	Unlimited      bool
	ShadowMode     bool
	DetailedMetric bool
	// ValueToMetric is the node's own value_to_metric; MetricKey applies
	// the flags of every node on the path.
	ValueToMetric bool
	// ShareThreshold is the node's own share_threshold; KeyBuilder applies
	// the flags of every node on the path.
	ShareThreshold bool
	// QuotaMode marks a quota descriptor: the request is over the limit
	// only if every quota descriptor is.
	QuotaMode bool
	// Metadata is the node's user metadata (JSON-like values), sent back to
	// the client while the descriptor is under its limit. Read-only.
	Metadata map[string]any
	// OnStoreError is what the rule answers when the store cannot decide
	// (on_store_error, else WithStoreErrorDefault's).
	OnStoreError StoreErrorAction
	// Lease is the descriptor's lease field (ratelimitd): whether replicas
	// may lease blocks of the rule's counters (pkg/store/lease). LeaseUnset
	// leaves it to the global LEASE_ENABLED; see Leases.
	Lease Lease
	// Source is "file:line" of the node's key, for logs and /rlconfig.
	Source string
	// Index is the rule's position in its descriptor's rate_limits (0 for
	// a rate_limit). Each limit of rate_limits is a Rule of its own, with
	// its own counter, sharing the descriptor's fields above (StatKey,
	// modes, metadata, ...); Match returns the first, and Limits lists all.
	Index int

	// limits are every limit of the rule's descriptor, this one included,
	// in config order.
	limits []*Rule

	// path describes how each request entry reached this rule, root first.
	// It is nil for rules not built by Parse (e.g. request overrides), which
	// then count per value at every level.
	path []level
	// key is the constant part of the rule's store keys (KeyBuilder).
	key keyParts
	// slot holds an observer's counters for the rule (observed.go); nil for
	// rules not built by Parse.
	slot *observerSlot
	// storeErrorSet: the rule's block says on_store_error, so
	// WithStoreErrorDefault leaves it alone.
	storeErrorSet bool
}

// levelKind is how a request entry reached a node.
type levelKind uint8

const (
	byValue    levelKind = iota + 1 // key and exact value
	byWildcard                      // key and a value pattern containing '*'
	byKey                           // key alone: every value
	byRegex                         // key and a value_regex
)

// level is one node on a rule's path from the domain root.
type level struct {
	key   string
	value string // exact value, wildcard pattern or regex; empty for byKey
	kind  levelKind
	// shared: values matching this wildcard or regex share one counter
	// (share_threshold).
	shared        bool
	valueToMetric bool
}

// StoreErrorAction is a rule's on_store_error: what it answers when the
// store cannot decide (Redis down or too slow).
type StoreErrorAction uint8

const (
	// StoreErrorUnavailable fails the request with UNAVAILABLE, as
	// envoyproxy does; Envoy's failure_mode_deny then decides. The default.
	StoreErrorUnavailable StoreErrorAction = iota
	// StoreErrorAllow answers OK for this rule.
	StoreErrorAllow
	// StoreErrorDeny answers OVER_LIMIT for this rule.
	StoreErrorDeny
	// StoreErrorLocal decides the rule in the replica's memory with its
	// share of the limit, and charges what it admitted to Redis once Redis
	// answers again (pkg/store/fallback).
	StoreErrorLocal
)

func (a StoreErrorAction) String() string {
	switch a {
	case StoreErrorAllow:
		return "allow"
	case StoreErrorDeny:
		return "deny"
	case StoreErrorLocal:
		return "local"
	default:
		return "unavailable"
	}
}

// ParseStoreErrorAction reads an on_store_error value, in any case.
func ParseStoreErrorAction(s string) (StoreErrorAction, error) {
	if a, ok := parseStoreErrorAction(s); ok {
		return a, nil
	}
	return 0, fmt.Errorf("want %s, got %q", storeErrorActions, s)
}

// storeErrorActions lists on_store_error's values for error messages.
const storeErrorActions = "unavailable, allow, deny or local"

func parseStoreErrorAction(s string) (StoreErrorAction, bool) {
	switch strings.ToLower(s) {
	case "unavailable":
		return StoreErrorUnavailable, true
	case "allow":
		return StoreErrorAllow, true
	case "deny":
		return StoreErrorDeny, true
	case "local":
		return StoreErrorLocal, true
	}
	return 0, false
}

// Lease is a descriptor's lease field: unset, true or false.
type Lease uint8

const (
	// LeaseUnset: the global setting (LEASE_ENABLED) decides. Rules from
	// xDS, which has no such field, are always unset.
	LeaseUnset Lease = iota
	// LeaseOn: lease: true. Only rules whose every limit can lease have it
	// (Parse refuses the others).
	LeaseOn
	// LeaseOff: lease: false, whatever the global setting.
	LeaseOff
)

func (l Lease) String() string {
	switch l {
	case LeaseOn:
		return "true"
	case LeaseOff:
		return "false"
	default:
		return "unset"
	}
}

// Leases reports whether the store may lease blocks of this rule's counter
// (store.Request.Lease): the rule's lease field, or global (LEASE_ENABLED)
// where it is unset, and only for a limit that can lease (lease.Leasable). An
// unlimited rule never reaches a store, so it never leases.
func (r *Rule) Leases(global bool) bool {
	switch {
	case r.Unlimited || r.Lease == LeaseOff:
		return false
	case r.Lease == LeaseUnset && !global:
		return false
	default:
		return lease.Leasable(r.Limit)
	}
}

// Limits returns every limit of the rule's descriptor in config order: the
// rule alone for a rate_limit, each item of rate_limits otherwise. All of
// them are decided together, all-or-nothing. The slice is shared: do not
// modify it.
func (r *Rule) Limits() []*Rule {
	if r.limits == nil {
		// A Rule not built by Parse or OverrideRule (tests).
		return []*Rule{r}
	}
	return r.limits
}

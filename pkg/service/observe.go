package service

import (
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Observer receives what a Service decides, for a program's own metrics
// or logs (WithMetrics gives the daemon's Prometheus metrics instead). Its
// methods run on the deciding goroutine: they must be quick and safe for
// concurrent use.
type Observer interface {
	// Observe is one counted descriptor's decision.
	Observe(Hit)
	// Refund is hits given back to a counter (a negative hits_addend).
	Refund(Hit)
	// Request is one call: its gRPC code (codes.Code's String: "OK",
	// "Unavailable", ...) and how long it took.
	Request(code string, took time.Duration)
	// StoreError is a batch the store could not decide ("timeout",
	// "unavailable", ...).
	StoreError(kind string)
	// StoreErrorAnswer is a request the store could not decide that its
	// rules' on_store_error answered: "allow" or "deny".
	StoreErrorAnswer(answer string)
	// ServiceError is a request refused before the store (malformed, or
	// no rules).
	ServiceError()
	// GlobalShadowMode is a request WithShadowMode answered OK although a
	// limit was over.
	GlobalShadowMode()
	// DomainNotFound is a request whose domain no rule has.
	DomainNotFound(domain string, descriptors int)
}

// WithObserver sends every decision to obs; it replaces WithMetrics, and
// WithMetrics replaces it.
func WithObserver(obs Observer) Option {
	return func(o *options) { o.observer, o.registerer = coreObserver{obs}, nil }
}

// Entry is one key and value of a request's descriptor.
type Entry struct{ Key, Value string }

// Rule describes one limit of the rules in force.
type Rule struct {
	Domain string
	// StatKey is envoyproxy's stats key of the descriptor
	// (domain.key_value.key2); Source is "file:line" of its key.
	StatKey, Source string
	// Name is rate_limit.name.
	Name string
	// Unlimited rules are never counted; Limit is the zero Limit for them.
	Unlimited bool
	Limit     algorithms.Limit
	// Unit and RequestsPerUnit are the rate_limit as written.
	Unit            rlsv3.RateLimitResponse_RateLimit_Unit
	RequestsPerUnit uint32
	// ShadowMode and QuotaMode are the rule's shadow_mode and quota_mode.
	ShadowMode, QuotaMode bool
}

// Hit is one counted descriptor's decision.
type Hit struct {
	Rule       Rule
	Descriptor []Entry
	Hits       uint64
	Allowed    bool
	// Shadow: the rule's shadow_mode or WithShadowMode let a denial
	// through.
	Shadow bool
	// Usage: the hits were usage, recorded whatever the decision.
	Usage bool
	// FromCache: a local over-limit cache answered; Local: the store's
	// fallback decided in this process's memory.
	FromCache, Local bool
	// Charged: the store charged the hits, so Remaining is after them.
	Charged             bool
	Capacity, Remaining uint64
}

func ruleOf(r *config.Rule) Rule {
	if r == nil {
		return Rule{}
	}
	return Rule{Domain: r.Domain, StatKey: r.StatKey, Source: r.Source, Name: r.Name,
		Unlimited: r.Unlimited, Limit: r.Limit, Unit: r.Unit, RequestsPerUnit: r.RequestsPerUnit,
		ShadowMode: r.ShadowMode, QuotaMode: r.QuotaMode}
}

func entriesOf(in []config.Entry) []Entry {
	out := make([]Entry, len(in))
	for i, e := range in {
		out[i] = Entry(e)
	}
	return out
}

// coreObserver is an Observer as the core service calls it.
type coreObserver struct{ obs Observer }

func (c coreObserver) Observe(h metrics.Hit) {
	c.obs.Observe(Hit{Rule: ruleOf(h.Rule), Descriptor: entriesOf(h.Entries), Hits: h.Hits,
		Allowed: h.Allowed, Shadow: h.Shadow, Usage: h.Usage, FromCache: h.FromCache, Local: h.Local,
		Charged: h.Charged, Capacity: h.Capacity, Remaining: h.Remaining})
}

func (c coreObserver) Refund(r *config.Rule, entries []config.Entry, hits uint64) {
	c.obs.Refund(Hit{Rule: ruleOf(r), Descriptor: entriesOf(entries), Hits: hits, Allowed: true, Charged: true})
}

func (c coreObserver) Request(code string, took time.Duration) { c.obs.Request(code, took) }
func (c coreObserver) BackendError(kind string)                { c.obs.StoreError(kind) }
func (c coreObserver) StoreErrorAnswer(answer string)          { c.obs.StoreErrorAnswer(answer) }
func (c coreObserver) ServiceError()                           { c.obs.ServiceError() }
func (c coreObserver) GlobalShadowMode()                       { c.obs.GlobalShadowMode() }
func (c coreObserver) DomainNotFound(domain string, descriptors int) {
	c.obs.DomainNotFound(domain, descriptors)
}

package service

import (
	"context"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// CounterStatus is what one descriptor resolved to.
type CounterStatus uint8

const (
	// NoRule: unknown domain or no matching rule; never counted.
	NoRule CounterStatus = iota + 1
	// Unlimited: the rule is unlimited; never counted.
	Unlimited
	// Replaced: another rule of the request replaces this one.
	Replaced
	// Counted: the rule's counter is Key.
	Counted
)

// Counter is one descriptor resolved exactly as ShouldRateLimit resolves
// it: what the counters API (docs/counters.md) reads and resets.
type Counter struct {
	Status CounterStatus
	// Rule is nil for NoRule.
	Rule *Rule
	// Key and Mode are set when Counted; Key is the deciding limit's
	// counter, Keys every limit's (rate_limits), which a reset deletes
	// together.
	Key  string
	Keys []string
	Mode algorithms.Mode
	// Decision is a check's (hits 0), set by Inspect when Counted.
	Decision algorithms.Decision
}

// Counters resolves descriptors of domain as ShouldRateLimit does, asking
// the store nothing: the keys a reset deletes. Errors carry a gRPC status.
func (s *Service) Counters(domain string, descriptors [][]Entry) ([]Counter, error) {
	got, err := s.core.Counters(domain, coreDescriptors(descriptors))
	return countersOf(got), err
}

// Inspect is Counters plus a check (zero hits) of every counted
// descriptor in one store call: what ShouldRateLimit would see now,
// charging nothing.
func (s *Service) Inspect(ctx context.Context, domain string, descriptors [][]Entry) ([]Counter, error) {
	got, err := s.core.Inspect(ctx, domain, coreDescriptors(descriptors))
	return countersOf(got), err
}

func coreDescriptors(in [][]Entry) [][]config.Entry {
	out := make([][]config.Entry, len(in))
	for i, d := range in {
		out[i] = make([]config.Entry, len(d))
		for j, e := range d {
			out[i][j] = config.Entry(e)
		}
	}
	return out
}

func countersOf(in []ratelimit.Counter) []Counter {
	if in == nil {
		return nil
	}
	out := make([]Counter, len(in))
	for i, c := range in {
		out[i] = Counter{Status: CounterStatus(c.Status), Key: c.Key, Keys: c.Keys, Mode: c.Mode, Decision: c.Decision}
		if c.Rule != nil {
			r := ruleOf(c.Rule)
			out[i].Rule = &r
		}
	}
	return out
}

package ratelimit

import (
	"context"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
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

// Counter is one descriptor resolved exactly as ShouldRateLimit resolves it,
// for the counters API (internal/admin).
type Counter struct {
	Status CounterStatus
	// Rule is nil for NoRule; shared with the config, read-only.
	Rule *config.Rule
	// Key and Mode are set when Counted; Key is the first limit's counter
	// (Inspect: the deciding limit's, as Rule), Keys every limit's
	// (rate_limits), which a reset deletes together.
	Key  string
	Keys []string
	Mode algorithms.Mode
	// Decision is a check's (hits 0), set by Inspect when Counted.
	Decision algorithms.Decision
}

// Counters resolves descriptors of domain with ShouldRateLimit's caps,
// matcher, replaces and key builder, without asking the store: the keys a
// reset must delete. Errors carry a gRPC status (InvalidArgument,
// Unavailable without a config).
func (s *Service) Counters(domain string, descriptors [][]config.Entry) ([]Counter, error) {
	out, _, err := s.counters(domain, descriptors)
	return out, err
}

// Inspect is Counters plus a check (hits 0) of every counted descriptor in
// one Take, so it reports what ShouldRateLimit would see now and charges
// nothing: a check never writes a state (algorithms.TakeAll).
func (s *Service) Inspect(ctx context.Context, domain string, descriptors [][]config.Entry) ([]Counter, error) {
	out, p, err := s.counters(domain, descriptors)
	if err != nil {
		return nil, err
	}
	// The counters API reports what the store holds: a replica's local
	// share while Redis is down is not that.
	for i := range p.reqs {
		p.reqs[i].Fallback = store.FallbackNone
	}
	results, err := s.take(ctx, p)
	if err != nil {
		return nil, s.backendError(ctx, err)
	}
	// A descriptor with several limits reports the one that decides it,
	// as ShouldRateLimit answers with it (see plan.decide).
	p.decide(results)
	for i := range out {
		if sl := p.slots[i]; sl.kind == counted {
			out[i].Rule, out[i].Key, out[i].Decision = p.rules[sl.decider], p.reqs[sl.decider].Key, results[sl.decider].Decision
		}
	}
	return out, nil
}

func (s *Service) counters(domain string, descriptors [][]config.Entry) ([]Counter, *plan, error) {
	req := &rlsv3.RateLimitRequest{Domain: domain, Descriptors: make([]*ratelimitv3.RateLimitDescriptor, len(descriptors))}
	for i, entries := range descriptors {
		d := &ratelimitv3.RateLimitDescriptor{HitsAddend: wrapperspb.UInt64(0)}
		for _, e := range entries {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
		}
		req.Descriptors[i] = d
	}
	if err := s.caps.validate(req); err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cfg := s.cfg.Current()
	if cfg == nil {
		return nil, nil, status.Error(codes.Unavailable, "no rate limit configuration loaded")
	}
	p, err := s.plan(cfg, req)
	if err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	out := make([]Counter, len(p.slots))
	for i, sl := range p.slots {
		c := &out[i]
		c.Rule = sl.rule
		switch sl.kind {
		case noLimit:
			c.Status, c.Rule = NoRule, nil
		case unlimited:
			c.Status = Unlimited
		case replaced:
			c.Status = Replaced
		case counted:
			c.Status, c.Key, c.Mode = Counted, p.reqs[sl.req].Key, p.reqs[sl.req].Mode
			for _, r := range p.reqs[sl.req : sl.req+sl.n] {
				c.Keys = append(c.Keys, r.Key)
			}
		}
	}
	return out, p, nil
}

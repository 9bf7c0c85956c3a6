package service

import (
	"fmt"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/config"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// slotKind is what the response says for one request descriptor.
type slotKind uint8

const (
	// noLimit: unknown domain or no matching rule; a bare OK.
	noLimit slotKind = iota + 1
	// unlimited: OK with limit_remaining MaxUint32, never counted.
	unlimited
	// replaced: another matched rule replaces this one; a bare OK.
	replaced
	// counted: decided by the store.
	counted
)

type slot struct {
	kind slotKind
	rule *config.Rule
	// req indexes plan.reqs when kind is counted.
	req int
	// entries are the request descriptor's, for detailed metrics.
	entries []config.Entry
	// quota: the rule is one of the request's quota alternatives
	// (quota_mode or QUOTA_MODE, and not shadow_mode), even under global
	// SHADOW_MODE, where its Mode is Shadow.
	quota bool
}

// plan is a request resolved against one config snapshot: what each
// descriptor answers, and the store requests for the counted ones.
type plan struct {
	slots []slot
	reqs  []store.Request
}

func (s *Service) plan(cfg *config.Config, req *rlsv3.RateLimitRequest) (*plan, error) {
	domain := req.GetDomain()
	descs := req.GetDescriptors()
	entries := make([][]config.Entry, len(descs))
	rules := make([]*config.Rule, len(descs))
	var replacing map[string]struct{}
	// Match every descriptor first: a rule may be replaced by one matched
	// after it, as in envoyproxy.
	for i, d := range descs {
		entries[i] = toEntries(d.GetEntries())
		if len(entries[i]) == 0 {
			continue
		}
		if o := d.GetLimit(); o != nil {
			if !cfg.HasDomain(domain) {
				continue
			}
			r, err := overrideRule(domain, entries[i], o)
			if err != nil {
				return nil, fmt.Errorf("descriptor %d: %w", i, err)
			}
			rules[i] = r
			continue
		}
		r := cfg.Match(domain, entries[i])
		if r == nil {
			continue
		}
		rules[i] = r
		for _, name := range r.Replaces {
			if replacing == nil {
				replacing = make(map[string]struct{})
			}
			replacing[name] = struct{}{}
		}
	}

	p := &plan{slots: make([]slot, len(descs))}
	for i, r := range rules {
		switch {
		case r == nil:
			p.slots[i] = slot{kind: noLimit}
		case r.Unlimited:
			p.slots[i] = slot{kind: unlimited, rule: r}
		case r.Name != "" && isReplaced(replacing, r.Name):
			p.slots[i] = slot{kind: replaced, rule: r}
		default:
			quota := !r.ShadowMode && (r.QuotaMode || s.globalQuota)
			p.slots[i] = slot{kind: counted, rule: r, req: len(p.reqs), entries: entries[i], quota: quota}
			p.reqs = append(p.reqs, store.Request{
				Key:   s.keys.Key(r, entries[i]),
				Limit: r.Limit,
				Hits:  hits(req, descs[i]),
				Mode:  s.modeOf(r, quota),
			})
		}
	}
	return p, nil
}

// modeOf tells the store how a denial of this rule affects the request, so
// that shadow and quota rules are decided in the same single round trip:
// under global SHADOW_MODE nothing may deny anything else, as envoyproxy
// counts every descriptor there.
func (s *Service) modeOf(r *config.Rule, quota bool) algorithms.Mode {
	switch {
	case s.globalShadow || r.ShadowMode:
		return algorithms.Shadow
	case quota:
		return algorithms.Quota
	default:
		return algorithms.Enforce
	}
}

func isReplaced(replacing map[string]struct{}, name string) bool {
	_, ok := replacing[name]
	return ok
}

// hits follows envoyproxy: the descriptor's hits_addend wins, zero meaning
// check only; otherwise the request's, where zero means one.
func hits(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) uint64 {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	if n := req.GetHitsAddend(); n > 0 {
		return uint64(n)
	}
	return 1
}

func toEntries(in []*ratelimitv3.RateLimitDescriptor_Entry) []config.Entry {
	out := make([]config.Entry, len(in))
	for i, e := range in {
		out[i] = config.Entry{Key: e.GetKey(), Value: e.GetValue()}
	}
	return out
}

// overrideRule is config.OverrideRule (envoyproxy's fixed window for a
// descriptor's own limit), which we extend with unit_multiplier because our
// windows may span any whole number of units.
func overrideRule(domain string, entries []config.Entry, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) (*config.Rule, error) {
	r, err := config.OverrideRule(domain, entries, rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()), o.GetRequestsPerUnit())
	if err != nil {
		return nil, err
	}
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
		r.Limit.Period *= time.Duration(m.GetValue())
		if err := r.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("limit override unit_multiplier %d: %w", m.GetValue(), err)
		}
	}
	return r, nil
}

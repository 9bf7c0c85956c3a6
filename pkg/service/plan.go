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
	// fallback: a counted rule has an on_store_error other than
	// unavailable, so a store failure may still be answered.
	fallback bool
}

// planOne and planFew hold a small request's plan, its slots, its store
// requests and its entries in one allocation (see newPlan).
type planOne struct {
	p       plan
	slots   [1]slot
	reqs    [1]store.Request
	entries [2]config.Entry
}

type planFew struct {
	p       plan
	slots   [few]slot
	reqs    [few]store.Request
	entries [2 * few]config.Entry
}

// newPlan allocates a plan for n descriptors holding total entries: one
// allocation when the request is small, as Envoy's are, instead of one per
// descriptor and per slice.
func newPlan(n, total int) (*plan, []config.Entry) {
	if n == 1 && total <= 2 {
		b := &planOne{}
		b.p.slots, b.p.reqs = b.slots[:], b.reqs[:0]
		return &b.p, b.entries[:total]
	}
	if n <= few && total <= 2*few {
		b := &planFew{}
		b.p.slots, b.p.reqs = b.slots[:n], b.reqs[:0]
		return &b.p, b.entries[:total]
	}
	return &plan{slots: make([]slot, n), reqs: make([]store.Request, 0, n)}, make([]config.Entry, total)
}

func (s *Service) plan(cfg *config.Config, req *rlsv3.RateLimitRequest) (*plan, error) {
	domain := req.GetDomain()
	descs := req.GetDescriptors()
	total := 0
	for _, d := range descs {
		total += len(d.GetEntries())
	}
	p, all := newPlan(len(descs), total)
	var replacing map[string]struct{}
	// Match every descriptor first: a rule may be replaced by one matched
	// after it, as in envoyproxy.
	for i, d := range descs {
		in := d.GetEntries()
		entries := all[:len(in):len(in)]
		all = all[len(in):]
		for j, e := range in {
			entries[j] = config.Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		sl := &p.slots[i]
		sl.entries = entries
		if len(entries) == 0 {
			continue
		}
		if o := d.GetLimit(); o != nil {
			if !cfg.HasDomain(domain) {
				continue
			}
			r, err := overrideRule(domain, entries, o)
			if err != nil {
				return nil, fmt.Errorf("descriptor %d: %w", i, err)
			}
			sl.rule = r
			continue
		}
		r := cfg.Match(domain, entries)
		if r == nil {
			continue
		}
		sl.rule = r
		for _, name := range r.Replaces {
			if replacing == nil {
				replacing = make(map[string]struct{})
			}
			replacing[name] = struct{}{}
		}
	}

	for i := range p.slots {
		sl := &p.slots[i]
		r := sl.rule
		switch {
		case r == nil:
			sl.kind = noLimit
		case r.Unlimited:
			sl.kind = unlimited
		case r.Name != "" && isReplaced(replacing, r.Name):
			sl.kind = replaced
		default:
			sl.quota = !r.ShadowMode && (r.QuotaMode || s.globalQuota)
			sl.kind, sl.req = counted, len(p.reqs)
			p.fallback = p.fallback || r.OnStoreError != config.StoreErrorUnavailable
			h, usage := hits(req, descs[i])
			p.reqs = append(p.reqs, store.Request{
				Key:   s.keys.Key(r, sl.entries),
				Limit: r.Limit,
				Hits:  h,
				Mode:  s.modeOf(r, sl.quota),
				Usage: usage,
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
//
// A descriptor's own non-zero hits_addend is usage (Envoy Gateway's cost,
// AI Gateway's and apply_on_stream_done's token counts, which Envoy reports
// when the response ends and whose answer it ignores): recorded in full,
// past the limit too, whatever the request's verdict. Hits from the
// request (or the implicit one) are admissions: all-or-nothing. See "Usage
// and admissions" in README.md.
func hits(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) (n uint64, usage bool) {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue(), h.GetValue() > 0
	}
	if n := req.GetHitsAddend(); n > 0 {
		return uint64(n), false
	}
	return 1, false
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

package ratelimit

import (
	"fmt"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
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
	// rule is the descriptor's matched rule (its first limit): the fields
	// every limit shares (StatKey, modes, metadata) are read from it, a
	// limit's own from plan.rules.
	rule *config.Rule
	// req and n index plan.reqs when kind is counted: the descriptor's
	// limits that are not replaced are reqs[req : req+n], in config order.
	req, n int
	// decider indexes plan.reqs: the limit the descriptor answers with,
	// set by plan.decide (respond calls it) once the store has answered.
	decider int
	// entries are the request descriptor's, for detailed metrics.
	entries []config.Entry
	// quota: the rule is one of the request's quota alternatives
	// (quota_mode or QUOTA_MODE, and not shadow_mode), even under global
	// SHADOW_MODE, where its Mode is Shadow.
	quota bool
	// group numbers the slot's quota group from 1 (WithQuotaGroups); 0:
	// none.
	group int
}

// plan is a request resolved against one config snapshot: what each
// descriptor answers, and the store requests for the counted ones.
type plan struct {
	slots []slot
	reqs  []store.Request
	// fallback: a counted rule has an on_store_error other than
	// unavailable, so a store failure may still be answered.
	fallback bool
	// rules[i] is the limit reqs[i] counts (a rate_limits item, or the
	// descriptor's rule).
	rules []*config.Rule
}

// planOne and planFew hold a small request's plan, its slots, its store
// requests and its entries in one allocation (see newPlan).
type planOne struct {
	p       plan
	slots   [1]slot
	reqs    [1]store.Request
	rules   [1]*config.Rule
	entries [2]config.Entry
}

type planFew struct {
	p       plan
	slots   [few]slot
	reqs    [few]store.Request
	rules   [few]*config.Rule
	entries [2 * few]config.Entry
}

// newPlan allocates a plan for n descriptors holding total entries: one
// allocation when the request is small, as Envoy's are, instead of one per
// descriptor and per slice (descriptors with several limits may grow reqs
// past it).
func newPlan(n, total int) (*plan, []config.Entry) {
	if n == 1 && total <= 2 {
		b := &planOne{}
		b.p.slots, b.p.reqs, b.p.rules = b.slots[:], b.reqs[:0], b.rules[:0]
		return &b.p, b.entries[:total]
	}
	if n <= few && total <= 2*few {
		b := &planFew{}
		b.p.slots, b.p.reqs, b.p.rules = b.slots[:n], b.reqs[:0], b.rules[:0]
		return &b.p, b.entries[:total]
	}
	return &plan{slots: make([]slot, n), reqs: make([]store.Request, 0, n), rules: make([]*config.Rule, 0, n)}, make([]config.Entry, total)
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
			r, err := cfg.OverrideRule(domain, entries, rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()), o.GetRequestsPerUnit(), o.GetUnitMultiplier().GetValue())
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
		for _, l := range r.Limits() {
			for _, name := range l.Replaces {
				if replacing == nil {
					replacing = make(map[string]struct{})
				}
				replacing[name] = struct{}{}
			}
		}
	}

	if s.quotaGroups {
		s.planGrouped(p, req, descs, replacing)
		return p, nil
	}
	for i := range p.slots {
		s.planSlot(p, i, req, descs, replacing, false)
	}
	return p, nil
}

// planLimits adds a store request per limit of sl's rule that no matched
// rule replaces; the descriptor is replaced when every limit is. The
// limits after the first are Joined to it: one descriptor, so one quota
// alternative (and so is the first when joined: the previous descriptor's
// quota group continues, see planGrouped). Usage (the descriptor's own hits_addend) is recorded on
// every limit, and so is a refund (is_negative_hits: the hits hits says,
// given back as algorithms.NegativeHits ops). Each op carries Lease when its limit leases (the rule's
// lease field, else WithLease) and it is an enforced admission.
func (s *Service) planLimits(p *plan, sl *slot, req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor, replacing map[string]struct{}, joined bool) {
	r := sl.rule
	sl.quota = !r.ShadowMode && (r.QuotaMode || s.globalQuota)
	mode := s.modeOf(r, sl.quota)
	h, usage := hits(req, d)
	if d.GetIsNegativeHits() {
		// A refund: never denied, so neither shadow nor quota, and never
		// usage (see "Refunds" in README.md).
		mode, usage, sl.quota = algorithms.NegativeHits, false, false
	}
	// Only enforced admissions lease: a block is taken and answered from
	// as all-or-nothing admissions are; shadow and quota ops may be
	// recorded past the limit and usage always is. A refund is marked too,
	// though never answered from a lease: it reaches the backend through
	// the lease store, whose view of the counter then follows it.
	lease := (mode == algorithms.Enforce && !usage) || mode == algorithms.NegativeHits
	first := len(p.reqs)
	for _, l := range r.Limits() {
		if l.Name != "" && isReplaced(replacing, l.Name) {
			continue
		}
		p.fallback = p.fallback || l.OnStoreError != config.StoreErrorUnavailable
		p.reqs = append(p.reqs, store.Request{
			Key:      s.keys.Key(l, sl.entries),
			Limit:    l.Limit,
			Hits:     h,
			Mode:     mode,
			Usage:    usage,
			Joined:   joined || len(p.reqs) > first,
			Lease:    lease && l.Leases(s.globalLease),
			Fallback: fallbackOf(l.OnStoreError),
		})
		p.rules = append(p.rules, l)
	}
	if len(p.reqs) == first {
		sl.kind = replaced
		return
	}
	sl.kind, sl.req, sl.n, sl.decider = counted, first, len(p.reqs)-first, first
}

// decide picks, once the store has answered, the limit each counted
// descriptor answers with: the one that denied (of several, the one that
// holds it back longest), else the one with the least left; the first in
// config order on a tie. A descriptor with one limit answers with it.
func (p *plan) decide(results []store.Result) {
	for i := range p.slots {
		sl := &p.slots[i]
		if sl.kind != counted {
			continue
		}
		best := sl.req
		for j := sl.req + 1; j < sl.req+sl.n; j++ {
			if decidesOver(results[j].Decision, results[best].Decision) {
				best = j
			}
		}
		sl.decider = best
	}
}

// decidesOver reports whether limit decision a, rather than b, decides
// their descriptor.
func decidesOver(a, b algorithms.Decision) bool {
	switch {
	case a.Allowed != b.Allowed:
		return !a.Allowed
	case !a.Allowed:
		return a.RetryAfter > b.RetryAfter
	default:
		return a.Remaining < b.Remaining
	}
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

// hits follows envoyproxy: the descriptor's hits_addend wins (zero: check
// only), else the request's (zero: one). A descriptor's own non-zero
// hits_addend is usage, recorded in full whatever the verdict
// (docs/tokens.md, "Usage and admissions"); the others are admissions.
func hits(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) (n uint64, usage bool) {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue(), h.GetValue() > 0
	}
	if n := req.GetHitsAddend(); n > 0 {
		return uint64(n), false
	}
	return 1, false
}

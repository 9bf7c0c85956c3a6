package ratelimit

import (
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// The descriptor entries that name a quota group: Envoy AI Gateway's
// QuotaPolicy descriptors carry the backend and the model they count.
const (
	backendNameKey       = "backend_name"
	modelNameOverrideKey = "model_name_override"
)

// WithQuotaGroups is QUOTA_GROUP_BY_BACKEND (envoyproxy's open PR #1243):
// quota descriptors naming the same backend_name and model_name_override
// form one group, over when any of them is (a tenant's bucket or the
// model's default one), and a request is over only when every group is;
// quota descriptors naming neither are grouped by all their entries. With
// RESPONSE_DYNAMIC_METADATA the response lists the backends that still
// have quota (passedBackends), so that Envoy can fail over to one.
func WithQuotaGroups(on bool) Option {
	return func(s *Service) { s.quotaGroups = on }
}

// quotaGroupKey is the group of a quota descriptor's entries: its backend
// and model when it names either, else all its entries (so unrelated
// descriptors never share a group). The separators cannot occur in a key
// that is a prefix of another, so distinct groups never share a key.
func quotaGroupKey(entries []config.Entry) string {
	var backend, model string
	found := false
	var all strings.Builder
	for _, e := range entries {
		switch e.Key {
		case backendNameKey:
			backend, found = e.Value, true
		case modelNameOverrideKey:
			model, found = e.Value, true
		}
		all.WriteString(e.Key)
		all.WriteByte(0)
		all.WriteString(e.Value)
		all.WriteByte(0)
	}
	if found {
		return "\x01" + backend + "\x00" + model
	}
	return all.String()
}

// planGrouped plans every slot as plan does, but each quota descriptor
// right after the earlier ones of its group, its first limit Joined to
// theirs: the store then decides the group as one quota alternative. The
// order of other descriptors is kept.
func (s *Service) planGrouped(p *plan, req *rlsv3.RateLimitRequest, descs []*ratelimitv3.RateLimitDescriptor, replacing map[string]struct{}) {
	keys := make([]string, len(p.slots))
	for i, sl := range p.slots {
		if r := sl.rule; r != nil && !r.Unlimited && !r.ShadowMode && (r.QuotaMode || s.globalQuota) && !descs[i].GetIsNegativeHits() {
			keys[i] = quotaGroupKey(sl.entries)
		}
	}
	done := make([]bool, len(p.slots))
	group := 0
	for i := range p.slots {
		if done[i] {
			continue
		}
		if keys[i] == "" {
			s.planSlot(p, i, req, descs, replacing, false)
			continue
		}
		group++
		joined := false
		for j := i; j < len(p.slots); j++ {
			if done[j] || keys[j] != keys[i] {
				continue
			}
			done[j] = true
			p.slots[j].group = group
			s.planSlot(p, j, req, descs, replacing, joined)
			joined = joined || p.slots[j].kind == counted
		}
	}
}

// planSlot decides slot i's kind and plans its limits; joined continues the
// quota alternative of the op before it.
func (s *Service) planSlot(p *plan, i int, req *rlsv3.RateLimitRequest, descs []*ratelimitv3.RateLimitDescriptor, replacing map[string]struct{}, joined bool) {
	sl := &p.slots[i]
	switch r := sl.rule; {
	case r == nil:
		sl.kind = noLimit
	case r.Unlimited:
		sl.kind = unlimited
	default:
		s.planLimits(p, sl, req, descs[i], replacing, joined)
	}
}

// overGroups reports which quota groups have a descriptor over its limit
// (indexed by slot.group); nil without groups.
func overGroups(p *plan, resp *rlsv3.RateLimitResponse) []bool {
	var over []bool
	for i, sl := range p.slots {
		if sl.group == 0 {
			continue
		}
		for len(over) <= sl.group {
			over = append(over, false)
		}
		if resp.Statuses[i].GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			over[sl.group] = true
		}
	}
	return over
}

// available reports whether descriptor i may be offered as a routing
// target: not over its limit, not unlimited, and not in a quota group that
// is over (envoyproxy's PR #1243).
func available(p *plan, over []bool, resp *rlsv3.RateLimitResponse, i int) bool {
	sl := p.slots[i]
	if sl.kind == unlimited || resp.Statuses[i].GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		return false
	}
	return sl.group == 0 || !over[sl.group]
}

// passedBackends lists, once per group, the backend_name and
// model_name_override of the available descriptors that name either, in
// request order: where Envoy may send the request.
func passedBackends(p *plan, over []bool, resp *rlsv3.RateLimitResponse) *structpb.Value {
	var list []*structpb.Value
	seen := map[string]bool{}
	for i, sl := range p.slots {
		if !available(p, over, resp, i) {
			continue
		}
		var backend, model string
		found := false
		for _, e := range sl.entries {
			switch e.Key {
			case backendNameKey:
				backend, found = e.Value, true
			case modelNameOverrideKey:
				model, found = e.Value, true
			}
		}
		key := quotaGroupKey(sl.entries)
		if !found || seen[key] {
			continue
		}
		seen[key] = true
		list = append(list, structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			backendNameKey:       structpb.NewStringValue(backend),
			modelNameOverrideKey: structpb.NewStringValue(model),
		}}))
	}
	if len(list) == 0 {
		return nil
	}
	return structpb.NewListValue(&structpb.ListValue{Values: list})
}

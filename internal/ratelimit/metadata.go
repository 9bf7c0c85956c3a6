package ratelimit

import (
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"
)

// addDynamicMetadata is envoyproxy's RESPONSE_DYNAMIC_METADATA: the
// request's domain, descriptors and hits_addend, and the merged `metadata`
// of the rules of every counted descriptor that is not over its limit (nor
// in a quota group that is, with passedBackends: see WithQuotaGroups), so
// filters after the rate limit one can act on them. Like envoyproxy, the
// rules of unlimited and replaced descriptors contribute nothing: they were
// never checked. Each descriptor also says its code and the name of the
// limit that decided it (see describeOutcome).
func (s *Service) addDynamicMetadata(req *rlsv3.RateLimitRequest, p *plan, resp *rlsv3.RateLimitResponse) {
	if !s.dynamicMetadata {
		return
	}
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.GetDomain())}
	descs := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for i, d := range req.GetDescriptors() {
		ds := descriptorStruct(d)
		describeOutcome(ds, p, i, resp.Statuses[i])
		descs = append(descs, structpb.NewStructValue(ds))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	over := overGroups(p, resp)
	merged := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i, sl := range p.slots {
		if sl.kind != counted || sl.rule.Metadata == nil || !available(p, over, resp, i) {
			continue
		}
		md, err := structpb.NewStruct(sl.rule.Metadata)
		if err != nil {
			// internal/config admits JSON-like values only; a failure here is a bug
			// worth a log line, not a failed request.
			s.errLog.Warn("rule metadata is not a protobuf Struct", zap.String("rule", sl.rule.StatKey), zap.Error(err))
			continue
		}
		mergeStruct(merged, md)
	}
	if len(merged.GetFields()) > 0 {
		fields["metadata"] = structpb.NewStructValue(merged)
	}
	if len(over) > 0 {
		if list := passedBackends(p, over, resp); list != nil {
			fields["passedBackends"] = list
		}
	}
	resp.DynamicMetadata = &structpb.Struct{Fields: fields}
}

func descriptorStruct(d *ratelimitv3.RateLimitDescriptor) *structpb.Struct {
	entries := make([]*structpb.Value, 0, len(d.GetEntries()))
	for _, e := range d.GetEntries() {
		entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
	}
	fields := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
	if d.GetLimit() != nil {
		fields["limit"] = structpb.NewStringValue(strings.TrimSpace(d.GetLimit().String()))
	}
	if h := d.GetHitsAddend(); h != nil {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
	}
	return &structpb.Struct{Fields: fields}
}

// describeOutcome adds to descriptor i's struct its code ("OK" or
// "OVER_LIMIT", the enum's name) and limitName, the name of the limit that
// decided it when that limit has one (an unlimited rule's name too; none
// for a descriptor without a rule or replaced), so access logs and later
// filters can tell which limit denied. The keys are envoyproxy's proposed
// ones (envoyproxy/ratelimit#1239), beside entries: consumers that read
// only entries and limit see nothing new.
func describeOutcome(ds *structpb.Struct, p *plan, i int, st *rlsv3.RateLimitResponse_DescriptorStatus) {
	ds.Fields["code"] = structpb.NewStringValue(st.GetCode().String())
	var name string
	switch sl := p.slots[i]; sl.kind {
	case counted:
		name = p.rules[sl.decider].Name
	case unlimited:
		name = sl.rule.Name
	}
	if name != "" {
		ds.Fields["limitName"] = structpb.NewStringValue(name)
	}
}

// mergeStruct adds src's fields to dst: nested structs merge, and
// otherwise the first rule to set a key keeps it, as envoyproxy merges.
func mergeStruct(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		existing, ok := dst.Fields[k]
		if !ok {
			dst.Fields[k] = v
			continue
		}
		if a, b := existing.GetStructValue(), v.GetStructValue(); a != nil && b != nil {
			mergeStruct(a, b)
		}
	}
}

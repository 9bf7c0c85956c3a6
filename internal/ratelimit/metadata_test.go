package ratelimit_test

import (
	"encoding/json"
	"reflect"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

const metadataConfig = `
domain: m
descriptors:
  - key: model
    value: small
    metadata: {route: {pool: cheap, weight: 1}, tier: free}
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: model
    value: big
    metadata: {route: {region: eu}, tier: paid}
    rate_limit: {unit: minute, requests_per_unit: 5}
`

func TestDynamicMetadata(t *testing.T) {
	f := newFixture(t, metadataConfig, ratelimit.WithDynamicMetadata(true))
	req := request("m", desc("model", "small"), desc("model", "big"))
	req.HitsAddend = 1
	first := f.call(t, req)
	got, _ := protojson.Marshal(first.GetDynamicMetadata())
	want := `{"descriptors":[{"code":"OK","entries":["model=small"]},{"code":"OK","entries":["model=big"]}],"domain":"m","hitsAddend":1,` +
		`"metadata":{"route":{"pool":"cheap","region":"eu","weight":1},"tier":"free"}}`
	if !jsonEqual(t, string(got), want) {
		t.Fatalf("dynamic_metadata:\n got %s\nwant %s", got, want)
	}

	// small is now over its limit: only big's metadata is offered.
	second := f.call(t, request("m", desc("model", "small"), desc("model", "big")))
	got, _ = protojson.Marshal(second.GetDynamicMetadata().GetFields()["metadata"])
	if !jsonEqual(t, string(got), `{"route":{"region":"eu"},"tier":"paid"}`) {
		t.Fatalf("metadata with small over its limit: %s", got)
	}

	off := newFixture(t, metadataConfig)
	if md := off.call(t, req).GetDynamicMetadata(); md != nil {
		t.Fatalf("dynamic_metadata without RESPONSE_DYNAMIC_METADATA: %v", md)
	}
}

func TestGlobalQuotaMode(t *testing.T) {
	f := newFixture(t, metadataConfig, ratelimit.WithQuotaMode(true))
	req := request("m", desc("model", "small"), desc("model", "big"))
	f.call(t, req) // small: 1 of 1
	resp := f.call(t, req)
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("QUOTA_MODE with one descriptor left: overall %v, statuses %v", resp.GetOverallCode(), resp.GetStatuses())
	}
	if got := resp.GetStatuses()[1].GetLimitRemaining(); got != 3 {
		t.Fatalf("big remaining %d, want 3: the allowed quota descriptor is charged", got)
	}
	for range 3 {
		f.call(t, req)
	}
	if resp := f.call(t, req); resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("QUOTA_MODE with every descriptor over: %v", resp.GetOverallCode())
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

const metadataRulesConfig = `
domain: m
descriptors:
  - key: plain
    metadata: {from: [plain]}
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    metadata: {free: true}
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    metadata: {shadow: true}
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: zero
    metadata: {zero: true}
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: old
    metadata: {old: true}
    rate_limit: {unit: minute, requests_per_unit: 5, name: old}
  - key: new
    metadata: {new: true}
    rate_limit: {unit: minute, requests_per_unit: 5, replaces: [{name: old}]}
  - key: nested
    metadata: {n: {a: 1, b: 1}}
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: nested2
    metadata: {n: {b: 2, c: 2}, from: [nested2]}
    rate_limit: {unit: minute, requests_per_unit: 5}
`

// TestDynamicMetadataRules pins which rules contribute metadata, as
// envoyproxy decides: counted descriptors not over their limit.
func TestDynamicMetadataRules(t *testing.T) {
	tests := []struct {
		name string
		opts []ratelimit.Option
		req  *rlsv3.RateLimitRequest
		want string // the "metadata" field; "" when absent
	}{{
		name: "unlimited rules are never checked, so add nothing",
		req:  request("m", desc("free", "x")),
		want: "",
	}, {
		name: "a replaced rule adds nothing, its replacement does",
		req:  request("m", desc("old", "x"), desc("new", "x")),
		want: `{"new":true}`,
	}, {
		name: "a shadow rule over its limit answers OK and adds its metadata",
		req:  request("m", desc("shadow", "x")),
		want: `{"shadow":true}`,
	}, {
		name: "a rule over its limit adds nothing, the others still do",
		req:  request("m", desc("zero", "x"), desc("plain", "x")),
		want: `{"from":["plain"]}`,
	}, {
		name: "global SHADOW_MODE answers OK but keeps the status, so the over rule adds nothing",
		opts: []ratelimit.Option{ratelimit.WithShadowMode(true)},
		req:  request("m", desc("zero", "x")),
		want: "",
	}, {
		name: "a descriptor's own limit has no rule metadata",
		req:  request("m", withOverride(desc("plain", "x"), 10, typev3.RateLimitUnit_MINUTE)),
		want: "",
	}, {
		name: "nested mappings merge, the first rule keeps a repeated key",
		req:  request("m", desc("nested", "x"), desc("nested2", "x")),
		want: `{"n":{"a":1,"b":1,"c":2},"from":["nested2"]}`,
	}, {
		name: "unknown domain: the request is echoed without metadata",
		req:  request("nowhere", desc("plain", "x")),
		want: "",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, metadataRulesConfig, append(tt.opts, ratelimit.WithDynamicMetadata(true))...)
			md := f.call(t, tt.req).GetDynamicMetadata()
			if got := md.GetFields()["domain"].GetStringValue(); got != tt.req.GetDomain() {
				t.Fatalf("domain %q, want %q (%v)", got, tt.req.GetDomain(), md)
			}
			if n := len(md.GetFields()["descriptors"].GetListValue().GetValues()); n != len(tt.req.GetDescriptors()) {
				t.Fatalf("%d descriptors echoed, want %d", n, len(tt.req.GetDescriptors()))
			}
			field, ok := md.GetFields()["metadata"]
			if tt.want == "" {
				if ok {
					t.Fatalf("metadata %v, want none", field)
				}
				return
			}
			got, err := protojson.Marshal(field)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, string(got), tt.want) {
				t.Fatalf("metadata %s, want %s", got, tt.want)
			}
		})
	}
}

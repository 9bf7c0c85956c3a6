package service_test

import (
	"encoding/json"
	"reflect"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratelimitd/ratelimitd/pkg/service"
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
	f := newFixture(t, metadataConfig, service.WithDynamicMetadata(true))
	req := request("m", desc("model", "small"), desc("model", "big"))
	req.HitsAddend = 1
	first := f.call(t, req)
	got, _ := protojson.Marshal(first.GetDynamicMetadata())
	want := `{"descriptors":[{"entries":["model=small"]},{"entries":["model=big"]}],"domain":"m","hitsAddend":1,` +
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
	f := newFixture(t, metadataConfig, service.WithQuotaMode(true))
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

package integration

import (
	"slices"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

const metadataConfig = `domain: md
descriptors:
  - key: model
    value: small
    metadata: {route: {pool: cheap}}
    rate_limit: {unit: day, requests_per_unit: 1}
`

const quotaConfig = `domain: q
descriptors:
  - key: model
    value: small
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: model
    value: big
    rate_limit: {unit: day, requests_per_unit: 2}
`

func TestEnvoyproxySwitches(t *testing.T) {
	t.Parallel()
	t.Run("RESPONSE_DYNAMIC_METADATA", func(t *testing.T) {
		svc, _ := startWithRedis(t, metadataConfig, "RESPONSE_DYNAMIC_METADATA=true")
		resp, err := svc.call(request("md", desc("model", "small")))
		if err != nil {
			t.Fatal(err)
		}
		md := resp.GetDynamicMetadata().GetFields()
		if md["domain"].GetStringValue() != "md" ||
			md["metadata"].GetStructValue().GetFields()["route"].GetStructValue().GetFields()["pool"].GetStringValue() != "cheap" {
			t.Fatalf("dynamic_metadata = %v", resp.GetDynamicMetadata())
		}
		// Over its limit, the rule no longer offers its metadata.
		resp, err = svc.call(request("md", desc("model", "small")))
		if err != nil {
			t.Fatal(err)
		}
		if _, has := resp.GetDynamicMetadata().GetFields()["metadata"]; has || resp.GetOverallCode() != over {
			t.Fatalf("over the limit: overall %v, dynamic_metadata %v", resp.GetOverallCode(), resp.GetDynamicMetadata())
		}
	})
	t.Run("QUOTA_MODE makes every rule an alternative", func(t *testing.T) {
		svc, _ := startWithRedis(t, quotaConfig, "QUOTA_MODE=true")
		req := request("q", desc("model", "small"), desc("model", "big"))
		for i, want := range []struct {
			overall   rlsv3.RateLimitResponse_Code
			codes     []rlsv3.RateLimitResponse_Code
			remaining []uint32
		}{
			{ok, []rlsv3.RateLimitResponse_Code{ok, ok}, []uint32{0, 1}},
			// small is out; big still has room, so the request passes and
			// only big is charged.
			{ok, []rlsv3.RateLimitResponse_Code{over, ok}, []uint32{0, 0}},
			{over, []rlsv3.RateLimitResponse_Code{over, over}, []uint32{0, 0}},
		} {
			resp, err := svc.call(req)
			if err != nil {
				t.Fatal(err)
			}
			got := []uint32{resp.GetStatuses()[0].GetLimitRemaining(), resp.GetStatuses()[1].GetLimitRemaining()}
			if resp.GetOverallCode() != want.overall || !slices.Equal(statusCodes(resp), want.codes) || !slices.Equal(got, want.remaining) {
				t.Fatalf("call %d: overall %v statuses %v remaining %v, want %v %v %v",
					i, resp.GetOverallCode(), statusCodes(resp), got, want.overall, want.codes, want.remaining)
			}
		}
	})
	t.Run("SHADOW_MODE counts everything and answers OK", func(t *testing.T) {
		svc, _ := startWithRedis(t, itConfig, "SHADOW_MODE=true")
		for i := range 2 {
			resp, err := svc.call(request("it", desc("generic_key", "zero"), desc("generic_key", "hits")))
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetCode() != over {
				t.Fatalf("call %d: overall %v statuses %v", i, resp.GetOverallCode(), statusCodes(resp))
			}
			// The other descriptor is charged although the zero rule is over.
			if got := resp.GetStatuses()[1].GetLimitRemaining(); got != uint32(9-i) {
				t.Fatalf("call %d: remaining %d, want %d", i, got, 9-i)
			}
		}
	})
	t.Run("MERGE_DOMAIN_CONFIG", func(t *testing.T) {
		root, _ := newConfigRoot(t, map[string]string{
			"a.yaml": "domain: merged\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n",
			"b.yaml": "domain: merged\ndescriptors:\n  - key: b\n    rate_limit: {unit: day, requests_per_unit: 2}\n",
		})
		svc := startService(t, root, "MERGE_DOMAIN_CONFIG=true", "BACKEND_TYPE=memory")
		resp, err := svc.call(request("merged", desc("a", "x"), desc("b", "y")))
		if err != nil {
			t.Fatal(err)
		}
		limits := []uint32{resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), resp.GetStatuses()[1].GetCurrentLimit().GetRequestsPerUnit()}
		if limits[0] != 1 || limits[1] != 2 || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("merged domain: limits %v, overall %v", limits, resp.GetOverallCode())
		}
	})
}

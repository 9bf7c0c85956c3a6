package ratelimit_test

import (
	"slices"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

// quotaGroupsConfig is AI Gateway's QuotaPolicy shape: per backend and
// model a default bucket, a tenant's bucket below it.
const quotaGroupsConfig = `
domain: q
descriptors:
  - key: backend_name
    value: default/openai
    descriptors:
      - key: model_name_override
        value: gpt-4o
        quota_mode: true
        metadata: {route: 4o}
        rate_limit: {unit: hour, requests_per_unit: 2}
        descriptors:
          - key: tenant
            value: acme
            quota_mode: true
            metadata: {tenant: acme}
            rate_limit: {unit: minute, requests_per_unit: 1}
      - key: model_name_override
        value: gpt-5
        quota_mode: true
        metadata: {route: "5"}
        rate_limit: {unit: hour, requests_per_unit: 2}
`

// quotaGroupsRequest names gpt-4o's default bucket, gpt-5's, then
// gpt-4o's tenant bucket: the group's members are not adjacent.
func quotaGroupsRequest() *rlsv3.RateLimitRequest {
	return request("q",
		desc("backend_name", "default/openai", "model_name_override", "gpt-4o"),
		desc("backend_name", "default/openai", "model_name_override", "gpt-5"),
		desc("backend_name", "default/openai", "model_name_override", "gpt-4o", "tenant", "acme"))
}

func TestQuotaGroups(t *testing.T) {
	for _, tt := range []struct {
		name     string
		grouped  bool
		steps    []rlsv3.RateLimitResponse_Code
		passed   []string // passedBackends after each step
		metadata []string // merged metadata after each step
		// retryAfter of the last (denied) step: grouped, gpt-4o waits for
		// both its buckets (the hour's); each descriptor alone, the
		// tenant's minute is the first to have room.
		retryAfter string
	}{{
		name:  "grouped by backend and model",
		steps: []rlsv3.RateLimitResponse_Code{OK, OK, OVER},
		passed: []string{
			`[{"backend_name":"default/openai","model_name_override":"gpt-4o"},{"backend_name":"default/openai","model_name_override":"gpt-5"}]`,
			// The tenant's bucket is spent: gpt-4o is out though its
			// default bucket has room, and its metadata is not offered.
			`[{"backend_name":"default/openai","model_name_override":"gpt-5"}]`,
			``,
		},
		metadata:   []string{`{"route":"4o","tenant":"acme"}`, `{"route":"5"}`, ``},
		grouped:    true,
		retryAfter: "3585",
	}, {
		name:       "each descriptor its own alternative (envoyproxy's release)",
		steps:      []rlsv3.RateLimitResponse_Code{OK, OK, OVER},
		passed:     []string{``, ``, ``},
		metadata:   []string{`{"route":"4o","tenant":"acme"}`, `{"route":"4o"}`, ``},
		retryAfter: "45",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, quotaGroupsConfig, ratelimit.WithQuotaGroups(tt.grouped),
				ratelimit.WithDynamicMetadata(true), ratelimit.WithHeaders(ratelimit.Headers{RetryAfter: true}))
			f.clock.Advance(15 * time.Second)
			var resp *rlsv3.RateLimitResponse
			for i, want := range tt.steps {
				if i == 1 && !tt.grouped {
					// Ungrouped, step 2 passes either way; spend gpt-5 first
					// so the third step finds every descriptor over.
					f.call(t, request("q", desc("backend_name", "default/openai", "model_name_override", "gpt-5")))
				}
				resp = f.call(t, quotaGroupsRequest())
				if resp.GetOverallCode() != want {
					t.Fatalf("step %d: overall %v, want %v (statuses %v)", i, resp.GetOverallCode(), want, resp.GetStatuses())
				}
				md := resp.GetDynamicMetadata().GetFields()
				if got := jsonOf(t, md["passedBackends"]); !sameJSON(t, got, tt.passed[i]) {
					t.Errorf("step %d: passedBackends %s, want %s", i, got, tt.passed[i])
				}
				if got := jsonOf(t, md["metadata"]); !sameJSON(t, got, tt.metadata[i]) {
					t.Errorf("step %d: metadata %s, want %s", i, got, tt.metadata[i])
				}
			}
			if got := headerMap(resp)["Retry-After"]; got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
		})
	}
}

// TestQuotaGroupsCharges holds an admitted grouped request to charging
// each bucket once, and a request whose only group is over to charging
// none, whatever order the planner sent them in.
func TestQuotaGroupsCharges(t *testing.T) {
	f := newFixture(t, quotaGroupsConfig, ratelimit.WithQuotaGroups(true))
	f.clock.Advance(15 * time.Second)
	gpt4o := []string{"backend_name", "default/openai", "model_name_override", "gpt-4o"}
	gpt5 := []string{"backend_name", "default/openai", "model_name_override", "gpt-5"}
	tenant := append(slices.Clone(gpt4o), "tenant", "acme")
	remaining := func() []uint32 {
		var out []uint32
		for _, d := range [][]string{gpt4o, gpt5, tenant} {
			out = append(out, f.call(t, request("q", withHits(desc(d...), 0))).GetStatuses()[0].GetLimitRemaining())
		}
		return out
	}
	f.call(t, quotaGroupsRequest())
	if got, want := remaining(), []uint32{1, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("after one admitted request: remaining %v, want %v", got, want)
	}
	// gpt-4o's group alone, its tenant bucket spent: over, nothing charged.
	if resp := f.call(t, request("q", desc(tenant...), desc(gpt4o...))); resp.GetOverallCode() != OVER {
		t.Fatalf("gpt-4o's group with its tenant bucket spent: %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	if got, want := remaining(), []uint32{1, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("after a denied request: remaining %v, want %v", got, want)
	}
}

func jsonOf(t *testing.T, v *structpb.Value) string {
	t.Helper()
	if v == nil {
		return ""
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameJSON compares two JSON texts, "" standing for absent.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	if a == "" || b == "" {
		return a == b
	}
	return jsonEqual(t, a, b)
}

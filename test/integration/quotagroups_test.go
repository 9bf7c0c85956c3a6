package integration

import (
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
)

// quotaGroupsConfig is Envoy AI Gateway's QuotaPolicy shape: per backend
// and model a default bucket, a tenant's bucket below it.
const quotaGroupsConfig = `domain: ai-gateway-quota
descriptors:
  - key: backend_name
    value: default/openai
    descriptors:
      - key: model_name_override
        value: gpt-4o
        quota_mode: true
        rate_limit: {unit: day, requests_per_unit: 5}
        descriptors:
          - key: tenant
            value: acme
            quota_mode: true
            rate_limit: {unit: day, requests_per_unit: 1}
      - key: model_name_override
        value: gpt-5
        quota_mode: true
        rate_limit: {unit: day, requests_per_unit: 2}
`

// TestQuotaGroupsFromTheBinary: with QUOTA_GROUP_BY_BACKEND a model whose
// tenant bucket is spent is out, though its default bucket has room: the
// request fails over to the other model (passedBackends names it) and is
// denied once every model is out, on Redis (one script call deciding the
// group as one quota alternative).
func TestQuotaGroupsFromTheBinary(t *testing.T) {
	t.Parallel()
	svc, _ := startWithRedis(t, quotaGroupsConfig, "QUOTA_GROUP_BY_BACKEND=true", "RESPONSE_DYNAMIC_METADATA=true")
	req := request("ai-gateway-quota",
		desc("backend_name", "default/openai", "model_name_override", "gpt-4o", "tenant", "acme"),
		desc("backend_name", "default/openai", "model_name_override", "gpt-5"),
		desc("backend_name", "default/openai", "model_name_override", "gpt-4o"))
	gpt4o := `{"backend_name":"default/openai","model_name_override":"gpt-4o"}`
	gpt5 := `{"backend_name":"default/openai","model_name_override":"gpt-5"}`
	for i, step := range []struct {
		want   string
		passed string
	}{
		{"OK", "[" + gpt4o + "," + gpt5 + "]"},
		{"OK", "[" + gpt5 + "]"}, // acme's bucket spent: gpt-4o is out
		{"OVER_LIMIT", ""},       // gpt-5's 2 spent too
	} {
		resp, err := svc.call(req)
		if err != nil || resp.GetOverallCode().String() != step.want {
			t.Fatalf("step %d: %v %v, want %s", i, resp.GetOverallCode(), err, step.want)
		}
		got := ""
		if v := resp.GetDynamicMetadata().GetFields()["passedBackends"]; v != nil {
			b, _ := protojson.Marshal(v)
			got = string(b)
		}
		if !sameJSONText(t, got, step.passed) {
			t.Errorf("step %d: passedBackends %s, want %s", i, got, step.passed)
		}
	}
	// Two admitted requests charged gpt-4o's default bucket twice; the
	// denied third nothing.
	resp, err := svc.call(request("ai-gateway-quota", withHits(desc("backend_name", "default/openai", "model_name_override", "gpt-4o"), 0)))
	if err != nil || resp.GetStatuses()[0].GetLimitRemaining() != 3 {
		t.Fatalf("gpt-4o's default bucket: %v %v, want 3 left", resp, err)
	}
}

func sameJSONText(t *testing.T, a, b string) bool {
	t.Helper()
	if a == "" || b == "" {
		return a == b
	}
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

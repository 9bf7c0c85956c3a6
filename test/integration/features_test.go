package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

const featuresConfig = `domain: feat
descriptors:
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: op
        rate_limit: {unit: day, requests_per_unit: 100}
`

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestShareThresholdMetricsAndDebugPort(t *testing.T) {
	t.Parallel()
	svc, _ := startWithRedis(t, featuresConfig)

	// share_threshold: every value under /files/ shares one counter of 2.
	var got []string
	for _, p := range []string{"/files/a", "/files/b", "/files/c"} {
		resp, err := svc.call(request("feat", desc("path", p)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.GetOverallCode().String())
	}
	if strings.Join(got, ",") != "OK,OK,OVER_LIMIT" {
		t.Fatalf("share_threshold: %v, want OK,OK,OVER_LIMIT", got)
	}

	// value_to_metric puts the tenant's value into the stats key.
	if _, err := svc.call(request("feat", desc("tenant", "acme", "op", "read"))); err != nil {
		t.Fatal(err)
	}
	if body := scrape(t, svc); !strings.Contains(body, `rule="feat.tenant_acme.op"`) {
		t.Errorf("value_to_metric: no series for feat.tenant_acme.op in\n%s", grepLines(body, "feat"))
	}

	code, body := get(t, "http://"+svc.debugAddr+"/rlconfig")
	if code != http.StatusOK || !strings.Contains(body, "feat.path_/files/*") {
		t.Errorf("/rlconfig: %d\n%s", code, body)
	}
	if code, _ := get(t, "http://"+svc.debugAddr+"/debug/pprof/goroutine?debug=1"); code != http.StatusNotFound {
		t.Errorf("pprof without DEBUG_PPROF: %d, want 404", code)
	}
}

func grepLines(body, substr string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

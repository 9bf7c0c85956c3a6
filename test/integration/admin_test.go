package integration

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
)

const adminToken = "it-admin-token-6f1c2a9e0b7d4c3a"

const adminConfig = `domain: shop
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket, burst: 5}
`

func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func adminDescs(kv ...string) []*adminv1.Descriptor {
	var out []*adminv1.Descriptor
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &adminv1.Descriptor{Entries: []*adminv1.Entry{{Key: kv[i], Value: kv[i+1]}}})
	}
	return out
}

// debugPost sends a counters API call as JSON to the debug port.
func debugPost(t *testing.T, svc *service, path, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+svc.debugAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// TestCountersAPI drives Get, Reset and List against the binary on each
// backend, with the token and without it.
func TestCountersAPI(t *testing.T) {
	t.Parallel()
	for _, be := range []backend{memoryBackend, redisBackend, sentinelBackend, clusterBackend} {
		t.Run(be.name, func(t *testing.T) {
			env := []string{"ADMIN_TOKEN_FILE=" + tokenFile(t, adminToken)}
			if be.name == "redis" {
				// Redis also with a key prefix and the local cache on.
				env = append(env, "CACHE_KEY_PREFIX=rl:", "LOCAL_CACHE_SIZE_IN_BYTES=1048576")
			}
			svc, _ := startOn(t, be, adminConfig, env...)
			testCounters(t, svc)
		})
	}
}

func testCounters(t *testing.T, svc *service) {
	// adminConfig's windows are hours of the wall clock: the counts below
	// must all fall in one.
	roomInWindow(t, time.Hour, 10*time.Second)
	c := adminv1.NewCountersClient(svc.conn)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	users := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace"}
	for _, u := range users {
		for range 3 {
			if resp, err := svc.call(request("shop", desc("user", u))); err != nil || resp.GetOverallCode() != ok {
				t.Fatalf("%s: %v %v", u, resp, err)
			}
		}
	}
	aliceOver := func() bool {
		resp, err := svc.call(request("shop", desc("user", "alice")))
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetOverallCode() == over
	}
	if !aliceOver() {
		t.Fatal("alice not over her limit of 3")
	}

	refuseWithoutToken(t, svc, c)
	if !aliceOver() {
		t.Fatal("a refused reset gave alice her quota back")
	}

	got, err := c.Get(withToken(ctx, adminToken), &adminv1.GetRequest{Domain: "shop", Descriptors: adminDescs("user", "alice", "ip", "10.0.0.1", "nope", "x")})
	if err != nil {
		t.Fatal(err)
	}
	if a := got.GetCounters()[0]; a.GetStatus() != adminv1.Status_COUNTED || a.GetUsed() != 3 || a.GetRemaining() != 0 || a.GetRule().GetAlgorithm() != "fixed_window" {
		t.Errorf("alice: %v", a)
	}
	if ip := got.GetCounters()[1]; ip.GetUsed() != 0 || ip.GetRemaining() != 5 || ip.GetRule().GetCapacity() != 5 {
		t.Errorf("untouched bucket: %v", ip)
	}
	if got.GetCounters()[2].GetStatus() != adminv1.Status_NO_RULE {
		t.Errorf("unmatched: %v", got.GetCounters()[2])
	}

	// Paged listing finds every user's counter.
	if listed := listAll(t, c, "shop", 2); len(listed) != len(users) {
		t.Errorf("listed %v, want the %d users", listed, len(users))
	}

	reset, err := c.Reset(withToken(ctx, adminToken), &adminv1.ResetRequest{Domain: "shop", Descriptors: adminDescs("user", "alice")})
	if err != nil || reset.GetDeleted() != 1 {
		t.Fatalf("Reset: %v %v", reset, err)
	}
	if aliceOver() {
		t.Error("alice still over her limit after the reset")
	}
	code, body := debugPost(t, svc, "/admin/counters/reset", "Bearer "+adminToken, `{"domain":"shop","descriptors":[{"entries":[{"key":"user","value":"bob"}]}]}`)
	if code != http.StatusOK || !strings.Contains(body, `"deleted":1`) {
		t.Errorf("HTTP reset: %d %s", code, body)
	}
	if resp, err := svc.call(request("shop", desc("user", "bob"))); err != nil || resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetLimitRemaining() != 2 {
		t.Errorf("bob after the HTTP reset: %v %v", resp, err)
	}

	metrics := scrape(t, svc)
	for _, want := range []string{`ratelimitd_admin_resets_total{domain="shop"} 2`, `ratelimitd_admin_unauthenticated_total{transport="grpc"} 6`, `ratelimitd_admin_unauthenticated_total{transport="http"} 3`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	logs := svc.logs.String()
	if strings.Count(logs, "counters reset") != 2 || !strings.Contains(logs, "token@127.0.0.1:") || !strings.Contains(logs, "user=alice") {
		t.Errorf("the resets are not logged with who and what:\n%s", logs)
	}
	if strings.Contains(logs, adminToken) {
		t.Error("the token is in the logs")
	}
}

// refuseWithoutToken checks that calls without the token, or with a wrong
// one, are refused over gRPC and HTTP.
func refuseWithoutToken(t *testing.T, svc *service, c adminv1.CountersClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for name, cctx := range map[string]context.Context{"no token": ctx, "wrong token": withToken(ctx, adminToken+"x")} {
		_, err := c.Reset(cctx, &adminv1.ResetRequest{Domain: "shop", Descriptors: adminDescs("user", "alice")})
		_, errGet := c.Get(cctx, &adminv1.GetRequest{Domain: "shop", Descriptors: adminDescs("user", "alice")})
		_, errList := c.List(cctx, &adminv1.ListRequest{Domain: "shop"})
		for _, e := range []error{err, errGet, errList} {
			if status.Code(e) != codes.Unauthenticated {
				t.Errorf("%s: %v, want UNAUTHENTICATED", name, e)
			}
		}
	}
	for _, auth := range []string{"", "Bearer wrong-token-0123456789", adminToken} {
		if code, body := debugPost(t, svc, "/admin/counters/reset", auth, `{"domain":"shop","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`); code != http.StatusUnauthorized {
			t.Errorf("HTTP reset with %q: %d %s, want 401", auth, code, body)
		}
	}
}

// listAll pages through a domain's counters and returns the first entry's
// values.
func listAll(t *testing.T, c adminv1.CountersClient, domain string, pageSize uint32) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	listed := map[string]bool{}
	token := ""
	for page := 0; ; page++ {
		resp, err := c.List(withToken(ctx, adminToken), &adminv1.ListRequest{Domain: domain, PageSize: pageSize, PageToken: token})
		if err != nil {
			t.Fatalf("List page %d: %v", page, err)
		}
		for _, lc := range resp.GetCounters() {
			listed[lc.GetEntries()[0].GetValue()] = true
		}
		if token = resp.GetNextPageToken(); token == "" || page > 1000 {
			return listed
		}
	}
}

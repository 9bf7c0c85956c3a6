package admin_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	"github.com/ratelimitd/ratelimitd/internal/admin"
	"github.com/ratelimitd/ratelimitd/internal/testcerts"
)

func TestGRPCClientCertificate(t *testing.T) {
	ca := testcerts.NewCA(t, "admin")
	server := ca.Server(t, "server")
	ops := ca.Client(t, "ops", "spiffe://cluster.local/ns/ops/sa/admin")
	envoy := ca.Client(t, "envoy", "spiffe://cluster.local/ns/edge/sa/envoy")
	r := newRig(t, admin.NewAuth(nil, []string{"spiffe://cluster.local/ns/ops/sa/admin"}))
	pair, err := tls.LoadX509KeyPair(server.CertFile, server.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	srvTLS := &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	addr := serve(t, r.admin, grpc.Creds(credentials.NewTLS(srvTLS)))
	dial := func(p testcerts.Pair) adminv1.CountersClient {
		cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		return client(t, addr, credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost", Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}
	r.hit(t, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := dial(envoy).Reset(ctx, &adminv1.ResetRequest{Domain: "d", Descriptors: descs("user", "alice")}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a client without the admin SAN: %v, want UNAUTHENTICATED", err)
	}
	reset, err := dial(ops).Reset(ctx, &adminv1.ResetRequest{Domain: "d", Descriptors: descs("user", "alice")})
	if err != nil || reset.GetDeleted() != 1 {
		t.Fatalf("the admin client: %v, %v", reset, err)
	}
	audit := r.logs.FilterMessage("counters reset").All()
	if len(audit) != 1 || !strings.HasPrefix(audit[0].ContextMap()["by"].(string), "san:spiffe://cluster.local/ns/ops/sa/admin@") {
		t.Errorf("audit lines: %v", audit)
	}
}

func TestHTTP(t *testing.T) {
	tests := []struct {
		name, path, auth, body string
		code                   int
		want                   string
	}{
		{"get", "/admin/counters/get", "Bearer " + token, `{"domain":"d","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`, 200, `"used":"1"`},
		{"no token", "/admin/counters/reset", "", `{"domain":"d","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`, 401, `"code":16`},
		{"wrong scheme", "/admin/counters/reset", "Basic " + token, `{"domain":"d","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`, 401, `"code":16`},
		{"still used", "/admin/counters/get", "Bearer " + token, `{"domain":"d","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`, 200, `"used":"1"`},
		{"list", "/admin/counters/list", "Bearer " + token, `{"domain":"d","pageSize":10}`, 200, `"value":"alice"`},
		{"reset", "/admin/counters/reset", "Bearer " + token, `{"domain":"d","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`, 200, `"deleted":1`},
		{"bad json", "/admin/counters/get", "Bearer " + token, `{"domain":`, 400, `"code":3`},
		{"no descriptors", "/admin/counters/get", "Bearer " + token, `{"domain":"d"}`, 400, `"code":3`},
		{"bad page token", "/admin/counters/list", "Bearer " + token, `{"domain":"d","pageToken":"!!"}`, 400, `"code":3`},
		{"page too large", "/admin/counters/list", "Bearer " + token, `{"domain":"d","pageSize":1001}`, 400, `"code":3`},
	}
	r := newRig(t, admin.NewAuth([]byte(token), nil))
	mux := http.NewServeMux()
	r.admin.RegisterHTTP(mux)
	r.hit(t, "alice")
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodPost, tt.path, strings.NewReader(tt.body))
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if body := w.Body.String(); w.Code != tt.code || !strings.Contains(strings.ReplaceAll(body, " ", ""), tt.want) {
			t.Errorf("%s: %d %s, want %d with %s", tt.name, w.Code, body, tt.code, tt.want)
		}
	}
}

// Without a token the debug port serves nothing: mTLS cannot be checked
// on plain HTTP.
func TestHTTPWithoutToken(t *testing.T) {
	r := newRig(t, admin.NewAuth(nil, []string{"admin.example"}))
	mux := http.NewServeMux()
	r.admin.RegisterHTTP(mux)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/admin/counters/get", strings.NewReader(`{}`)))
	if w.Code != http.StatusNotFound {
		t.Errorf("without a token: %d, want 404", w.Code)
	}
	if admin.NewAuth(nil, nil).Enabled() || !admin.NewAuth(nil, []string{"x"}).Enabled() || !admin.NewAuth([]byte("t"), nil).Enabled() {
		t.Error("Enabled is wrong")
	}
}

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	"github.com/ratelimitd/ratelimitd/internal/testcerts"
)

// Without a credential the API does not exist: not on the gRPC port, not
// on the debug port.
func TestCountersAPIOff(t *testing.T) {
	t.Parallel()
	root, _ := newConfigRoot(t, map[string]string{"shop.yaml": adminConfig})
	svc := startService(t, root, "BACKEND_TYPE=memory")
	svc.call(request("shop", desc("user", "alice")))
	_, err := adminv1.NewCountersClient(svc.conn).Reset(withToken(t.Context(), adminToken), &adminv1.ResetRequest{Domain: "shop", Descriptors: adminDescs("user", "alice")})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Reset without a configured credential: %v, want UNIMPLEMENTED", err)
	}
	if code, _ := debugPost(t, svc, "/admin/counters/get", "Bearer "+adminToken, `{}`); code != http.StatusNotFound {
		t.Errorf("debug port without a configured credential: %d, want 404", code)
	}
	if strings.Contains(scrape(t, svc), "ratelimitd_admin_") {
		t.Error("admin metrics without the API")
	}
	needGrpcurl(t)
	{
		list, err := exec.Command(grpcurlPath, "-plaintext", svc.grpcAddr, "list").CombinedOutput()
		if err != nil || strings.Contains(string(list), "ratelimitd.admin.v1.Counters") || !strings.Contains(string(list), "envoy.service.ratelimit.v3") {
			t.Errorf("reflection without a configured credential: %v\n%s", err, list)
		}
	}
}

// tlsClients dials addr over TLS with client's certificate.
func tlsClients(t *testing.T, addr string, ca *testcerts.CA, client testcerts.Pair) (rlsv3.RateLimitServiceClient, adminv1.CountersClient) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	pair, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn), adminv1.NewCountersClient(conn)
}

// ADMIN_CLIENT_SAN: over the gRPC port's mutual TLS, only a client
// certificate carrying the admin name may read or reset.
func TestCountersAPIClientCertificate(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "admin")
	root, _ := newConfigRoot(t, map[string]string{"shop.yaml": adminConfig})
	server := ca.Server(t, "server")
	svc := startService(t, root, "BACKEND_TYPE=memory", "GRPC_SERVER_USE_TLS=true",
		"GRPC_SERVER_TLS_CERT="+server.CertFile, "GRPC_SERVER_TLS_KEY="+server.KeyFile, "GRPC_CLIENT_TLS_CACERT="+ca.File,
		"ADMIN_CLIENT_SAN=spiffe://cluster.local/ns/ops/sa/admin")
	rls, envoyAdmin := tlsClients(t, svc.grpcAddr, ca, ca.Client(t, "envoy", "spiffe://cluster.local/ns/edge/sa/envoy"))
	_, opsAdmin := tlsClients(t, svc.grpcAddr, ca, ca.Client(t, "ops", "spiffe://cluster.local/ns/ops/sa/admin"))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for range 4 {
		if _, err := rls.ShouldRateLimit(ctx, request("shop", desc("user", "alice"))); err != nil {
			t.Fatal(err)
		}
	}
	alice := adminDescs("user", "alice")
	if _, err := envoyAdmin.Reset(ctx, &adminv1.ResetRequest{Domain: "shop", Descriptors: alice}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Reset by a client without the admin SAN: %v, want UNAUTHENTICATED", err)
	}
	if _, err := envoyAdmin.Get(ctx, &adminv1.GetRequest{Domain: "shop", Descriptors: alice}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Get by a client without the admin SAN: %v, want UNAUTHENTICATED", err)
	}
	got, err := opsAdmin.Get(ctx, &adminv1.GetRequest{Domain: "shop", Descriptors: alice})
	if err != nil || got.GetCounters()[0].GetUsed() != 3 || got.GetCounters()[0].GetRemaining() != 0 {
		t.Fatalf("the admin client's Get: %v %v (the refused reset must have changed nothing)", got, err)
	}
	reset, err := opsAdmin.Reset(ctx, &adminv1.ResetRequest{Domain: "shop", Descriptors: alice})
	if err != nil || reset.GetDeleted() != 1 {
		t.Fatalf("the admin client's Reset: %v %v", reset, err)
	}
	if resp, err := rls.ShouldRateLimit(ctx, request("shop", desc("user", "alice"))); err != nil || resp.GetOverallCode() != ok {
		t.Errorf("alice after the reset: %v %v", resp, err)
	}
	if !strings.Contains(svc.logs.String(), "san:spiffe://cluster.local/ns/ops/sa/admin@") {
		t.Errorf("the reset is not logged with the client's name:\n%s", svc.logs.String())
	}
	if code, _ := debugPost(t, svc, "/admin/counters/get", "", `{}`); code != http.StatusNotFound {
		t.Errorf("debug port with only ADMIN_CLIENT_SAN: %d, want 404 (plain HTTP cannot check certificates)", code)
	}
}

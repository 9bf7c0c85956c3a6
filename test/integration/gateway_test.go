package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testcerts"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// TestEnvoyGatewayContract runs the binary exactly as Envoy Gateway starts
// envoyproxy/ratelimit: rules over mutual-TLS xDS from go-control-plane's
// server, force start, gRPC served over TLS, Redis over mutual TLS,
// Prometheus on PROMETHEUS_ADDR with a statsd mapping file, and OTLP
// tracing.
func TestEnvoyGatewayContract(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "envoy-gateway")
	xdsServerPair := ca.Server(t, "envoy-gateway")
	rlServerPair := ca.Server(t, "envoy-ratelimit")
	rlClientPair := ca.Client(t, "envoy-ratelimit-client")
	redisPair := ca.Server(t, "redis")
	rds := redistest.StartMutualTLS(t, redisPair.CertFile, redisPair.KeyFile, ca.File, rlClientPair.CertFile, rlClientPair.KeyFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	xdsAddr, cache := gatewayXDS(t, pool, xdsServerPair)
	recv, otlpAddr := startOTLP(t)

	mapper := filepath.Join(t.TempDir(), "conf.yaml")
	if err := os.WriteFile(mapper, []byte(envoyGatewayMapping), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir() // Envoy Gateway sets RUNTIME_*; with xDS nothing is read there
	s := spawnService(t, root,
		"RUNTIME_IGNOREDOTFILES=true", "LOG_LEVEL=info", "USE_STATSD=false",
		"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL="+xdsAddr, "CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit",
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT="+rlServerPair.CertFile, "GRPC_SERVER_TLS_KEY="+rlServerPair.KeyFile,
		"GRPC_SERVER_TLS_CA_CERT="+ca.File,
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT="+rlClientPair.CertFile,
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY="+rlClientPair.KeyFile, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT="+ca.File,
		"FORCE_START_WITHOUT_INITIAL_CONFIG=true",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+rds.Addr,
		"REDIS_TLS=true", "REDIS_TLS_CLIENT_CERT="+rlClientPair.CertFile, "REDIS_TLS_CLIENT_KEY="+rlClientPair.KeyFile, "REDIS_TLS_CACERT="+ca.File,
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0", "PROMETHEUS_MAPPER_YAML="+mapper,
		"TRACING_ENABLED=true", "TRACING_SERVICE_NAME=envoy-ratelimit", "TRACING_SERVICE_NAMESPACE=envoy-gateway-system",
		"TRACING_SERVICE_INSTANCE_ID=envoy-ratelimit-0", "TRACING_SAMPLING_RATE=1.0",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://"+otlpAddr+"/v1/traces",
	)

	// Up without a config: listening, but not ready.
	testkit.WaitFor(t, 15*time.Second, "the HTTP port", func() bool {
		resp, err := http.Get("http://" + s.httpAddr + "/healthcheck")
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("ready before any config")
		}
		return true
	})

	pushGatewayPolicy(t, cache)
	s.waitHealthy(15 * time.Second)

	const traceID, envoySpan = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
	callAsEnvoy(t, s.grpcAddr, pool, traceID, envoySpan)

	// Envoy Gateway's e2e queries (test/e2e/tests/ratelimit.go) each
	// return a series, and OverLimitCount reads counters.
	series := scrapeEnvoySeries(t, "http://"+s.promAddr+"/metrics")
	for _, key2 := range []string{"masked_remote_address_0_0_0_0/0", "header_x-user-id_one", "user"} {
		found := false
		for name, v := range series {
			found = found || strings.HasPrefix(name, "ratelimit_service_rate_limit_over_limit{") && strings.Contains(name, `key2="`+key2+`"`) && v == 1
		}
		if !found {
			t.Errorf(`ratelimit_service_rate_limit_over_limit{key2=%q} has no series of value 1 among %v`, key2, series)
		}
	}
	if n := series[`ratelimit_service_rate_limit_over_limit{domain="default/eg/http",key1="httproute/default/backend/rule/0/match/0_httproute/default/backend/rule/0/match/0",key2="x-user-id"}`]; n != 1 {
		t.Errorf("over_limit of the x-user-id rule = %v, want 1", n)
	}

	s.stop() // flushes the spans
	logs := s.logs.String()
	for _, want := range []string{"xDS config loaded (ACK)", "GRPC_SERVER_TLS_CA_CERT"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q", want)
		}
	}
	if parents := recv.parentsOf(traceID, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"); len(parents) != 1 || !parents[envoySpan] {
		t.Errorf("ShouldRateLimit spans' parents %v, want Envoy's %s", parents, envoySpan)
	}
}

// gatewayXDS is Envoy Gateway's xDS server: go-control-plane's, over mutual
// TLS with certificates from its CA (pool).
func gatewayXDS(t *testing.T, pool *x509.CertPool, pair testcerts.Pair) (string, cachev3.SnapshotCache) {
	t.Helper()
	xdsCert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	xds := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{xdsCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})))
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(xds, serverv3.NewServer(context.Background(), cache, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = xds.Serve(ln) }()
	t.Cleanup(xds.Stop)
	return ln.Addr().String(), cache
}

// pushGatewayPolicy is Envoy Gateway pushing the policy it translated: a
// route's rule, then what its e2e tests limit on (a CIDR, a header value, a
// key-only entry).
func pushGatewayPolicy(t *testing.T, cache cachev3.SnapshotCache) {
	t.Helper()
	route := func(name string, child *rlsconfv3.RateLimitDescriptor) *rlsconfv3.RateLimitDescriptor {
		child.RateLimit = &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: 1}
		return &rlsconfv3.RateLimitDescriptor{Key: name, Value: name, Descriptors: []*rlsconfv3.RateLimitDescriptor{child}}
	}
	cfg := &rlsconfv3.RateLimitConfig{Name: "default/eg/http", Domain: "default/eg/http", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		route("httproute/default/backend/rule/0/match/0", &rlsconfv3.RateLimitDescriptor{Key: "x-user-id"}),
		route("httproute/default/cidr/rule/0/match/0", &rlsconfv3.RateLimitDescriptor{Key: "masked_remote_address", Value: "0.0.0.0/0"}),
		route("httproute/default/header/rule/0/match/0", &rlsconfv3.RateLimitDescriptor{Key: "header_x-user-id", Value: "one"}),
		route("httproute/default/jwt/rule/0/match/0", &rlsconfv3.RateLimitDescriptor{Key: "user"}),
	}}
	snap, err := cachev3.NewSnapshot("1", map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: {cfg}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.SetSnapshot(context.Background(), "envoy-ratelimit", snap); err != nil {
		t.Fatal(err)
	}
}

// callAsEnvoy calls addr over TLS as Envoy does: twice with its trace
// context (OK, then OVER_LIMIT), then twice each of Envoy Gateway's e2e
// tests' descriptors (the second is over).
func callAsEnvoy(t *testing.T, addr string, pool *x509.CertPool, traceID, envoySpan string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "default/eg/http", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
		{Key: "httproute/default/backend/rule/0/match/0", Value: "httproute/default/backend/rule/0/match/0"},
		{Key: "x-user-id", Value: "alice"},
	}}}}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-"+envoySpan+"-01")
		resp, err := client.ShouldRateLimit(ctx, req)
		cancel()
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("call %d: %v, %v; want %v", i, resp.GetOverallCode(), err, want)
		}
	}

	// Twice each of the e2e tests' descriptors: the second is over.
	for _, d := range [][]string{
		{"httproute/default/cidr/rule/0/match/0", "masked_remote_address", "0.0.0.0/0"},
		{"httproute/default/header/rule/0/match/0", "header_x-user-id", "one"},
		{"httproute/default/jwt/rule/0/match/0", "user", "alice"},
	} {
		for range 2 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := client.ShouldRateLimit(ctx, request("default/eg/http", desc(d[0], d[0], d[1], d[2])))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testcerts"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// tlsCall makes one ShouldRateLimit over TLS with an optional client pair.
func tlsCall(t *testing.T, addr string, ca *testcerts.CA, client *testcerts.Pair) error {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	cfg := &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if client != nil {
		pair, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, request("it", desc("global", "tls")))
	return err
}

// servedSerial is the serial of the certificate the server presents.
func servedSerial(t *testing.T, addr string, ca *testcerts.CA, client *testcerts.Pair) string {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	cfg := &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	if client != nil {
		pair, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestGRPCServerTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "grpc")
	server := ca.Server(t, "server")
	root, _ := newConfigRoot(t, map[string]string{"it.yaml": itConfig})

	t.Run("TLS", func(t *testing.T) {
		svc := startService(t, root, "BACKEND_TYPE=memory", "GRPC_SERVER_USE_TLS=true",
			"GRPC_SERVER_TLS_CERT="+server.CertFile, "GRPC_SERVER_TLS_KEY="+server.KeyFile)
		if err := tlsCall(t, svc.grpcAddr, ca, nil); err != nil {
			t.Fatalf("TLS call: %v", err)
		}
		if _, err := svc.call(request("it", desc("global", "plain"))); err == nil {
			t.Fatal("a plaintext call to a TLS server succeeded")
		}
	})

	t.Run("mTLS with SAN and rotation", func(t *testing.T) {
		rotating := ca.Server(t, "rotating")
		good := ca.Client(t, "good", "spiffe://cluster.local/ns/edge/sa/envoy")
		wrongSAN := ca.Client(t, "wrong", "spiffe://cluster.local/ns/other/sa/app")
		stranger := testcerts.NewCA(t, "stranger").Client(t, "stranger", "spiffe://cluster.local/ns/edge/sa/envoy")
		svc := startService(t, root, "BACKEND_TYPE=memory", "GRPC_SERVER_USE_TLS=true",
			"GRPC_SERVER_TLS_CERT="+rotating.CertFile, "GRPC_SERVER_TLS_KEY="+rotating.KeyFile,
			"GRPC_CLIENT_TLS_CACERT="+ca.File, "GRPC_CLIENT_TLS_SAN=spiffe://cluster.local/ns/edge/sa/envoy")
		if err := tlsCall(t, svc.grpcAddr, ca, &good); err != nil {
			t.Fatalf("client with the right SAN: %v", err)
		}
		for name, client := range map[string]*testcerts.Pair{"no certificate": nil, "wrong SAN": &wrongSAN, "another CA": &stranger} {
			if err := tlsCall(t, svc.grpcAddr, ca, client); err == nil {
				t.Errorf("%s: call accepted", name)
			}
		}

		before := servedSerial(t, svc.grpcAddr, ca, &good)
		next := ca.Server(t, "rotated")
		for _, f := range [][2]string{{next.CertFile, rotating.CertFile}, {next.KeyFile, rotating.KeyFile}} {
			data, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, f[1], string(data))
		}
		testkit.WaitFor(t, 10*time.Second, "the rotated certificate to be served", func() bool {
			return servedSerial(t, svc.grpcAddr, ca, &good) != before
		})
		if err := tlsCall(t, svc.grpcAddr, ca, &good); err != nil {
			t.Fatalf("call after rotation: %v", err)
		}

		// The client CA rotates too: clients of the new CA get in, the old
		// CA's are refused, without a restart.
		nextCA := testcerts.NewCA(t, "grpc-next")
		nextClient := nextCA.Client(t, "next", "spiffe://cluster.local/ns/edge/sa/envoy")
		writeFile(t, ca.File, string(nextCA.CertPEM))
		testkit.WaitFor(t, 10*time.Second, "the rotated client CA to be trusted", func() bool {
			return tlsCall(t, svc.grpcAddr, ca, &nextClient) == nil
		})
		if err := tlsCall(t, svc.grpcAddr, ca, &good); err == nil {
			t.Fatal("a client of the replaced CA was accepted")
		}
	})
}

func TestRedisTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "redis")
	server := ca.Server(t, "redis-server")

	t.Run("TLS", func(t *testing.T) {
		rds := redistest.StartTLS(t, server.CertFile, server.KeyFile, ca.File)
		svc := startWithRedisAt(t, rds.Addr, itConfig, "REDIS_TLS=true", "REDIS_TLS_CACERT="+ca.File)
		resp, err := svc.call(request("it", desc("global", "tls")))
		if err != nil || resp.GetOverallCode() != ok {
			t.Fatalf("call through TLS Redis: %v %v", resp, err)
		}
	})

	t.Run("client certificate", func(t *testing.T) {
		client := ca.Client(t, "ratelimitd", "ratelimitd")
		rds := redistest.StartMutualTLS(t, server.CertFile, server.KeyFile, ca.File, client.CertFile, client.KeyFile)
		svc := startWithRedisAt(t, rds.Addr, itConfig, "REDIS_TLS=true", "REDIS_TLS_CACERT="+ca.File,
			"REDIS_TLS_CLIENT_CERT="+client.CertFile, "REDIS_TLS_CLIENT_KEY="+client.KeyFile)
		resp, err := svc.call(request("it", desc("global", "mtls")))
		if err != nil || resp.GetOverallCode() != ok {
			t.Fatalf("call through mutual-TLS Redis: %v %v", resp, err)
		}

		// Without its certificate Redis refuses ratelimitd: no answer.
		root, _ := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
		bare := startService(t, root, "BACKEND_TYPE=redis", "REDIS_URL="+rds.Addr, "REDIS_TIMEOUT=500ms",
			"REDIS_TLS=true", "REDIS_TLS_CACERT="+ca.File)
		resp, err = bare.call(request("it", desc("global", "mtls")))
		if err == nil {
			t.Fatalf("call without a client certificate answered: %v", resp)
		}
		// TLS 1.3 finishes the client's side of the handshake before Redis
		// checks the certificate: its refusal reaches the first command as
		// the alert, or, when Redis has already closed, as a reset.
		if msg := err.Error(); !strings.Contains(msg, "certificate required") && !strings.Contains(msg, "connection reset by peer") && !strings.Contains(msg, "broken pipe") {
			t.Fatalf("call without a client certificate: %v, want Redis' TLS refusal", err)
		}
	})
}

package xdsconfig_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/ratelimitd/ratelimitd/internal/testcerts"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/internal/xdsconfig"
)

// TestTLS connects over TLS as Envoy Gateway configures it: the server
// requires a client certificate from its CA, the client checks the
// server's against CONFIG_GRPC_XDS_SERVER_TLS_CACERT and SAN.
func TestTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "xds")
	other := testcerts.NewCA(t, "other")
	serverPair := ca.Issue(t, testcerts.Leaf{Name: "envoy-gateway", DNS: []string{"envoy-gateway"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: x509.ExtKeyUsageServerAuth})
	client := ca.Client(t, "ratelimit")
	stranger := other.Client(t, "stranger")

	cert, err := tls.LoadX509KeyPair(serverPair.CertFile, serverPair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}

	cases := []struct {
		name  string
		files xdsconfig.TLSFiles
		ok    bool
	}{
		{"mutual TLS", xdsconfig.TLSFiles{CertFile: client.CertFile, KeyFile: client.KeyFile, CAFile: ca.File}, true},
		{"mutual TLS with SAN", xdsconfig.TLSFiles{CertFile: client.CertFile, KeyFile: client.KeyFile, CAFile: ca.File, ServerName: "envoy-gateway"}, true},
		{"wrong SAN", xdsconfig.TLSFiles{CertFile: client.CertFile, KeyFile: client.KeyFile, CAFile: ca.File, ServerName: "someone-else"}, false},
		{"no client certificate", xdsconfig.TLSFiles{CAFile: ca.File}, false},
		{"client certificate from another CA", xdsconfig.TLSFiles{CertFile: stranger.CertFile, KeyFile: stranger.KeyFile, CAFile: ca.File}, false},
		{"server not trusted", xdsconfig.TLSFiles{CertFile: client.CertFile, KeyFile: client.KeyFile, CAFile: other.File}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, "127.0.0.1:0", nil, grpc.Creds(credentials.NewTLS(serverTLS)))
			srv.set(t, "1", limit("a", "edge", "remote_address", 7))
			cfg, err := xdsconfig.ClientTLS(tc.files, "127.0.0.1:18000", nil)
			if err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zapcore.WarnLevel)
			src := run(t, srv.addr, xdsconfig.WithTLS(cfg), xdsconfig.WithLogger(zap.New(core)))
			if tc.ok {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := src.WaitReady(ctx); err != nil {
					t.Fatal(err)
				}
				if got := rpu(t, src, "edge", "remote_address"); got != 7 {
					t.Fatalf("limit %d, want 7", got)
				}
				return
			}
			testkit.WaitFor(t, 10*time.Second, "two failed streams logged", func() bool {
				return logs.FilterMessage("xDS stream failed; reconnecting").Len() >= 2
			})
			if src.Current() != nil {
				t.Fatal("config loaded over a connection that should have failed")
			}
		})
	}
}

func TestClientTLSErrors(t *testing.T) {
	ca := testcerts.NewCA(t, "xds")
	pair := ca.Client(t, "c")
	notPEM := t.TempDir() + "/ca.pem"
	if err := os.WriteFile(notPEM, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		files xdsconfig.TLSFiles
		want  string
	}{
		{"cert without key", xdsconfig.TLSFiles{CertFile: pair.CertFile}, "must be set together"},
		{"missing pair", xdsconfig.TLSFiles{CertFile: "/nonexistent.pem", KeyFile: "/nonexistent-key.pem"}, "CONFIG_GRPC_XDS_CLIENT_TLS_CERT/KEY"},
		{"missing CA", xdsconfig.TLSFiles{CAFile: "/nonexistent-ca.pem"}, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT"},
		{"CA not PEM", xdsconfig.TLSFiles{CAFile: notPEM}, "no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := xdsconfig.ClientTLS(tc.files, "127.0.0.1:18000", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestServerCARotation: a rotated CONFIG_GRPC_XDS_SERVER_TLS_CACERT applies
// to the next connection, without a restart.
func TestServerCARotation(t *testing.T) {
	oldCA, newCA := testcerts.NewCA(t, "old"), testcerts.NewCA(t, "new")
	pair := newCA.Server(t, "envoy-gateway")
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "127.0.0.1:0", nil, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	srv.set(t, "1", limit("a", "edge", "remote_address", 3))

	caFile := t.TempDir() + "/ca.crt"
	if err := os.WriteFile(caFile, oldCA.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := xdsconfig.ClientTLS(xdsconfig.TLSFiles{CAFile: caFile}, srv.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	src := run(t, srv.addr, xdsconfig.WithTLS(cfg), xdsconfig.WithLogger(zap.New(core)))
	testkit.WaitFor(t, 10*time.Second, "a server from another CA to be refused", func() bool {
		return logs.FilterMessage("xDS stream failed; reconnecting").Len() > 0
	})
	if src.Current() != nil {
		t.Fatal("config loaded from an untrusted server")
	}
	// The rotation, as a Secret update lands: the new CA next to the old.
	if err := os.WriteFile(caFile+".tmp", append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(caFile+".tmp", caFile); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := src.WaitReady(ctx); err != nil {
		t.Fatalf("rotated CA not used: %v", err)
	}
}

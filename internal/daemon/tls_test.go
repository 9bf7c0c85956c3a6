package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/testcerts"
)

// handshake runs a TLS handshake between server and client over loopback
// TCP (a synchronous net.Pipe deadlocks when both sides write an alert).
// The server sends a byte once it has accepted the client, so a client
// certificate rejected after the client's side of a TLS 1.3 handshake
// completed still fails.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	deadline := time.Now().Add(5 * time.Second)
	_ = sc.SetDeadline(deadline)
	_ = cc.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		srv := tls.Server(sc, server)
		err := srv.Handshake()
		if err == nil {
			_, err = srv.Write([]byte{1})
		}
		if err != nil {
			sc.Close() // unblock the client
		}
		done <- err
	}()
	cl := tls.Client(cc, client)
	err = cl.Handshake()
	if err == nil {
		_, err = cl.Read(make([]byte, 1))
	}
	cc.Close()
	if serr := <-done; err == nil {
		err = serr
	}
	return err
}

func clientConfig(t *testing.T, ca *testcerts.CA, serverName string, pair *testcerts.Pair) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	cfg := &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	if pair != nil {
		cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

func TestGRPCServerTLSClientSAN(t *testing.T) {
	ca := testcerts.NewCA(t, "grpc")
	server := ca.Server(t, "server")
	set := settings{GRPCTLS: true, GRPCTLSCert: server.CertFile, GRPCTLSKey: server.KeyFile,
		GRPCClientCACert: ca.File}
	clients := map[string]testcerts.Pair{
		"dns":      ca.Client(t, "dns", "envoy.edge.svc"),
		"wildcard": ca.Client(t, "wildcard", "*.edge.svc"),
		"spiffe":   ca.Client(t, "spiffe", "spiffe://cluster.local/ns/edge/sa/envoy"),
		"other":    ca.Client(t, "other", "app.other.svc"),
		"stranger": testcerts.NewCA(t, "stranger").Client(t, "stranger", "envoy.edge.svc"),
	}
	tests := []struct {
		san    string
		client string // "" presents no certificate
		ok     bool
	}{
		{"", "other", true}, // mTLS without a SAN: any certificate of the CA
		{"", "stranger", false},
		{"", "", false},
		{"envoy.edge.svc", "dns", true},
		{"envoy.edge.svc", "wildcard", true}, // as envoyproxy's host name check
		{"envoy.edge.svc", "other", false},
		{"envoy.edge.svc", "stranger", false},
		{"envoy.edge.svc", "", false},
		{"spiffe://cluster.local/ns/edge/sa/envoy", "spiffe", true},
		{"spiffe://cluster.local/ns/edge/sa/envoy", "dns", false},
	}
	for _, tc := range tests {
		t.Run(tc.san+" "+tc.client, func(t *testing.T) {
			s := set
			s.GRPCClientSAN = tc.san
			cfg, err := grpcServerTLS(s, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			var pair *testcerts.Pair
			if p, ok := clients[tc.client]; ok {
				pair = &p
			}
			err = handshake(t, cfg, clientConfig(t, ca, "localhost", pair))
			t.Logf("handshake: %v", err)
			if (err == nil) != tc.ok {
				t.Fatalf("handshake error %v, want success %v", err, tc.ok)
			}
		})
	}
}

func TestGRPCServerTLSSettingsErrors(t *testing.T) {
	ca := testcerts.NewCA(t, "errs")
	server := ca.Server(t, "server")
	tests := map[string]settings{
		"no key":          {GRPCTLSCert: server.CertFile},
		"missing files":   {GRPCTLSCert: "/nonexistent.pem", GRPCTLSKey: "/nonexistent.key"},
		"SAN without CA":  {GRPCTLSCert: server.CertFile, GRPCTLSKey: server.KeyFile, GRPCClientSAN: "x"},
		"CA not PEM":      {GRPCTLSCert: server.CertFile, GRPCTLSKey: server.KeyFile, GRPCClientCACert: server.KeyFile},
		"CA file missing": {GRPCTLSCert: server.CertFile, GRPCTLSKey: server.KeyFile, GRPCClientCACert: "/nonexistent.pem"},
	}
	for name, set := range tests {
		if _, err := grpcServerTLS(set, zap.NewNop()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Redis TLS: REDIS_TLS_CACERT's roots, the client certificate, and a
// skipped host name check that still verifies the chain.
func TestRedisTLSConfig(t *testing.T) {
	ca, stranger := testcerts.NewCA(t, "redis"), testcerts.NewCA(t, "stranger")
	// A certificate for the name Redis is known by, not the address dialled.
	named := ca.Issue(t, testcerts.Leaf{Name: "named", DNS: []string{"redis.internal"}, Usage: x509.ExtKeyUsageServerAuth})
	forged := stranger.Issue(t, testcerts.Leaf{Name: "forged", DNS: []string{"redis.internal"}, Usage: x509.ExtKeyUsageServerAuth})
	client := ca.Client(t, "ratelimitd", "ratelimitd")
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(ca.CertPEM)

	serverConfig := func(p testcerts.Pair, requireClient bool) *tls.Config {
		cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if requireClient {
			cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, clientCAs
		}
		return cfg
	}
	tests := []struct {
		name          string
		set           settings
		server        testcerts.Pair
		requireClient bool
		ok            bool
	}{
		{"host name mismatch", settings{RedisTLSCACert: ca.File}, named, false, false},
		{"skip host name", settings{RedisTLSCACert: ca.File, RedisTLSSkipVerifyHost: true}, named, false, true},
		{"skip host name, unknown CA", settings{RedisTLSCACert: ca.File, RedisTLSSkipVerifyHost: true}, forged, false, false},
		{"system roots only", settings{RedisTLSSkipVerifyHost: true}, named, false, false},
		{"client certificate required, none", settings{RedisTLSCACert: ca.File, RedisTLSSkipVerifyHost: true}, named, true, false},
		{"client certificate", settings{RedisTLSCACert: ca.File, RedisTLSSkipVerifyHost: true,
			RedisTLSClientCert: client.CertFile, RedisTLSClientKey: client.KeyFile}, named, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := redisTLS(tc.set)
			if err != nil {
				t.Fatal(err)
			}
			// go-redis dials by address: the server name is the IP.
			cfg = cfg.Clone()
			cfg.ServerName = "127.0.0.1"
			err = handshake(t, serverConfig(tc.server, tc.requireClient), cfg)
			t.Logf("handshake: %v", err)
			if (err == nil) != tc.ok {
				t.Fatalf("handshake error %v, want success %v", err, tc.ok)
			}
		})
	}
	for name, set := range map[string]settings{
		"CA missing":   {RedisTLSCACert: "/nonexistent.pem"},
		"bad key pair": {RedisTLSClientCert: client.CertFile, RedisTLSClientKey: named.KeyFile},
	} {
		if _, err := redisTLS(set); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

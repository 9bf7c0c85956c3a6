package redistest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// StartTLS runs a redis-server from PATH that speaks only TLS, with the
// given server certificate; clients are not asked for certificates.
func StartTLS(t testing.TB, certFile, keyFile, caFile string) *Server {
	t.Helper()
	return startTLS(t, certFile, keyFile, caFile, nil)
}

// StartMutualTLS is StartTLS with client certificates required: signed by
// caFile's CA. The readiness probe presents clientCert/clientKey.
func StartMutualTLS(t testing.TB, certFile, keyFile, caFile, clientCert, clientKey string) *Server {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatalf("redistest: client pair: %v", err)
	}
	return startTLS(t, certFile, keyFile, caFile, &pair)
}

func startTLS(t testing.TB, certFile, keyFile, caFile string, client *tls.Certificate) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(t, "redis-server not on PATH")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	authClients := "no"
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
		authClients = "yes"
	}
	s := &Server{dir: t.TempDir(), tlsOnly: true}
	s.args = []string{"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile,
		"--tls-auth-clients", authClients}
	s.dial = func() (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: 200 * time.Millisecond}, "tcp", s.Addr, cfg)
	}
	if err := s.spawn(bin); err != nil {
		t.Fatalf("redistest: TLS redis-server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

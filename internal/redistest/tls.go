package redistest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	authClients := "no"
	if client != nil {
		authClients = "yes"
	}
	port := FreePort(t)
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: t.TempDir()}
	cmd := exec.Command(bin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile,
		"--tls-auth-clients", authClients, "--save", "", "--appendonly", "no", "--dir", s.dir)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: start TLS redis-server: %v", err)
	}
	s.cmd = cmd
	go func() { _ = cmd.Wait() }()
	t.Cleanup(s.Stop)
	if err := waitReadyTLS(s.Addr, caFile, client, 10*time.Second); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return s
}

func waitReadyTLS(addr, caFile string, client *tls.Certificate, within time.Duration) error {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		d := &net.Dialer{Timeout: 200 * time.Millisecond}
		c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 16)
			n, _ := c.Read(buf)
			c.Close()
			if strings.HasPrefix(string(buf[:n]), "+PONG") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("TLS redis at %s not ready after %s", addr, within)
}

package xdsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/ratelimitd/ratelimitd/internal/tlsreload"
)

// TLSFiles are envoyproxy's CONFIG_GRPC_XDS_* TLS settings.
type TLSFiles struct {
	// CertFile and KeyFile are the client pair presented for mutual TLS
	// (CONFIG_GRPC_XDS_CLIENT_TLS_CERT/KEY); empty for server-only TLS.
	CertFile, KeyFile string
	// CAFile verifies the server (CONFIG_GRPC_XDS_SERVER_TLS_CACERT); empty
	// uses the system roots.
	CAFile string
	// ServerName is the name the server's certificate must carry
	// (CONFIG_GRPC_XDS_SERVER_TLS_SAN); empty uses the URL's host.
	ServerName string
}

// ClientTLS builds the connection's TLS to target. The client pair and the
// CA bundle are reread when their files change (a rotated Kubernetes
// secret needs no restart); a rotation that fails to load is passed to
// onReloadError and the previous files stay in use.
func ClientTLS(f TLSFiles, target string, onReloadError func(error)) (*tls.Config, error) {
	name := f.ServerName
	if name == "" {
		name = targetHost(target)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: name}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY must be set together")
	}
	var opts []tlsreload.Option
	if onReloadError != nil {
		opts = append(opts, tlsreload.OnReloadError(onReloadError))
	}
	if f.CertFile != "" {
		pair, err := tlsreload.Load(f.CertFile, f.KeyFile, opts...)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_CLIENT_TLS_CERT/KEY: %w", err)
		}
		cfg.GetClientCertificate = pair.GetClientCertificate
	}
	if f.CAFile != "" {
		pool, err := tlsreload.LoadPool(f.CAFile, opts...)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_SERVER_TLS_CACERT: %w", err)
		}
		if name == "" {
			return nil, fmt.Errorf("xds: no server name to verify for %q: set CONFIG_GRPC_XDS_SERVER_TLS_SAN", target)
		}
		// crypto/tls would verify against the bundle as read now; verifying
		// here, against the bundle as it is at each handshake, lets a
		// rotated CA apply to the next connection. The name is fixed (the
		// SAN setting or the URL's host), so nothing is left unchecked.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyServer(cs.PeerCertificates, pool.CertPool(), name)
		}
	}
	return cfg, nil
}

func verifyServer(chain []*x509.Certificate, roots *x509.CertPool, name string) error {
	if len(chain) == 0 {
		return errors.New("xds: the server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		DNSName:       name,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("xds: server certificate: %w", err)
	}
	return nil
}

// targetHost is the host gRPC would verify for target ("host:port",
// "dns:///host:port").
func targetHost(target string) string {
	if i := strings.LastIndex(target, "/"); i >= 0 {
		target = target[i+1:]
	}
	if host, _, err := net.SplitHostPort(target); err == nil {
		return host
	}
	return target
}

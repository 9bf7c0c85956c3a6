package xdsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

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

// ClientTLS builds the connection's TLS. The client pair is reread when its
// files change (a rotated Kubernetes secret needs no restart); a rotation
// that fails to load is passed to onReloadError and the previous pair stays.
func ClientTLS(f TLSFiles, onReloadError func(error)) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY must be set together")
	}
	if f.CertFile != "" {
		var opts []tlsreload.Option
		if onReloadError != nil {
			opts = append(opts, tlsreload.OnReloadError(onReloadError))
		}
		pair, err := tlsreload.Load(f.CertFile, f.KeyFile, opts...)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_CLIENT_TLS_CERT/KEY: %w", err)
		}
		cfg.GetClientCertificate = pair.GetClientCertificate
	}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_SERVER_TLS_CACERT: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_SERVER_TLS_CACERT: %s: no PEM certificate found", f.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

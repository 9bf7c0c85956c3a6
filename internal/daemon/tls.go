package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/certname"
	"github.com/ratelimitd/ratelimitd/internal/tlsreload"
)

// grpcServerTLS builds the gRPC server's TLS from envoyproxy's settings:
// GRPC_SERVER_TLS_CERT/KEY, and with GRPC_CLIENT_TLS_CACERT mutual TLS,
// where GRPC_CLIENT_TLS_SAN, when set, must be one of the client
// certificate's SANs. The pair and the client CA bundle are reread when
// their files change (cert-manager rotations need no restart); a rotation
// that fails to load is logged and the previous files keep being served.
func grpcServerTLS(set settings, log *zap.Logger) (*tls.Config, error) {
	if set.GRPCTLSCert == "" || set.GRPCTLSKey == "" {
		return nil, errors.New("GRPC_SERVER_USE_TLS needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
	}
	if set.GRPCClientSAN != "" && set.GRPCClientCACert == "" {
		return nil, errors.New("GRPC_CLIENT_TLS_SAN needs GRPC_CLIENT_TLS_CACERT")
	}
	reloadFailed := func(what string) tlsreload.Option {
		return tlsreload.OnReloadError(func(err error) {
			log.Warn("rotated "+what+" not loaded; serving the previous one", zap.Error(err))
		})
	}
	pair, err := tlsreload.Load(set.GRPCTLSCert, set.GRPCTLSKey, reloadFailed("GRPC_SERVER_TLS_CERT/KEY"))
	if err != nil {
		return nil, fmt.Errorf("GRPC_SERVER_TLS_CERT/KEY: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate}
	if set.GRPCClientCACert == "" {
		return cfg, nil
	}
	cas, err := tlsreload.LoadPool(set.GRPCClientCACert, reloadFailed("GRPC_CLIENT_TLS_CACERT"))
	if err != nil {
		return nil, fmt.Errorf("GRPC_CLIENT_TLS_CACERT: %w", err)
	}
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = cas.CertPool()
	if san := set.GRPCClientSAN; san != "" {
		cfg.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || len(chains[0]) == 0 || !certname.Has(chains[0][0], san) {
				return fmt.Errorf("client certificate lacks the SAN %q", san)
			}
			return nil
		}
	}
	// ClientCAs is read per handshake from a per-connection copy, so a
	// rotated bundle applies to the next connection.
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := cfg.Clone()
			c.ClientCAs = cas.CertPool()
			return c, nil
		},
	}, nil
}

func certPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate found", file)
	}
	return pool, nil
}

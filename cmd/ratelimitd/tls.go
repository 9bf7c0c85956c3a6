package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/ratelimitd/ratelimitd/internal/tlsreload"
)

// grpcServerTLS builds the gRPC server's TLS from envoyproxy's settings:
// GRPC_SERVER_TLS_CERT/KEY (reloaded from disk when rotated), and with
// GRPC_CLIENT_TLS_CACERT mutual TLS, where GRPC_CLIENT_TLS_SAN, when set,
// must be one of the client certificate's SANs.
func grpcServerTLS(set settings) (*tls.Config, error) {
	if set.GRPCTLSCert == "" || set.GRPCTLSKey == "" {
		return nil, errors.New("GRPC_SERVER_USE_TLS needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
	}
	pair, err := tlsreload.Load(set.GRPCTLSCert, set.GRPCTLSKey)
	if err != nil {
		return nil, fmt.Errorf("GRPC_SERVER_TLS_CERT/KEY: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate}
	if set.GRPCClientCACert == "" {
		if set.GRPCClientSAN != "" {
			return nil, errors.New("GRPC_CLIENT_TLS_SAN needs GRPC_CLIENT_TLS_CACERT")
		}
		return cfg, nil
	}
	pool, err := certPool(set.GRPCClientCACert)
	if err != nil {
		return nil, fmt.Errorf("GRPC_CLIENT_TLS_CACERT: %w", err)
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	if san := set.GRPCClientSAN; san != "" {
		cfg.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || len(chains[0]) == 0 || !hasSAN(chains[0][0], san) {
				return fmt.Errorf("client certificate lacks the SAN %q", san)
			}
			return nil
		}
	}
	return cfg, nil
}

func hasSAN(c *x509.Certificate, san string) bool {
	if slices.Contains(c.DNSNames, san) || slices.Contains(c.EmailAddresses, san) {
		return true
	}
	for _, ip := range c.IPAddresses {
		if ip.String() == san {
			return true
		}
	}
	for _, u := range c.URIs {
		if u.String() == san {
			return true
		}
	}
	return false
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

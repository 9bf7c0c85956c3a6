package tlsreload

import (
	"crypto/tls"
	"fmt"
)

// Pair is a certificate and key pair kept current from its files.
type Pair struct {
	src *source[*tls.Certificate]
}

// Load reads the pair once; a failure here is a startup error.
func Load(certFile, keyFile string, opts ...Option) (*Pair, error) {
	src, err := newSource([]string{certFile, keyFile}, func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load %s and %s: %w", certFile, keyFile, err)
		}
		return &cert, nil
	}, opts)
	if err != nil {
		return nil, err
	}
	return &Pair{src: src}, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.src.get(), nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate.
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.src.get(), nil
}

package tlsreload

import (
	"crypto/x509"
	"fmt"
	"os"
)

// Pool is a CA bundle kept current from its file, for verifying peers
// whose CA rotates.
type Pool struct {
	src *source[*x509.CertPool]
}

// LoadPool reads the PEM bundle once; a failure here is a startup error.
func LoadPool(file string, opts ...Option) (*Pool, error) {
	src, err := newSource([]string{file}, func() (*x509.CertPool, error) {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s: no PEM certificate found", file)
		}
		return pool, nil
	}, opts)
	if err != nil {
		return nil, err
	}
	return &Pool{src: src}, nil
}

// CertPool is the bundle's current certificates.
func (p *Pool) CertPool() *x509.CertPool { return p.src.get() }

// Package tlsreload serves a certificate and key from disk and picks up a
// rotated pair (cert-manager, a renewed secret) without a restart.
package tlsreload

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// checkEvery bounds how often a handshake stats the files.
const checkEvery = time.Second

// Pair is a certificate and key pair kept current from its files.
type Pair struct {
	certFile, keyFile string
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp
	checked time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// Load reads the pair once; a failure here is a startup error.
func Load(certFile, keyFile string) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile, now: time.Now}
	if err := p.reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// GetCertificate is for tls.Config.GetCertificate (and
// GetClientCertificate's callers). A pair that fails to load after a change
// is reported and the previous one keeps being served.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := p.now(); now.Sub(p.checked) >= checkEvery {
		p.checked = now
		if p.changed() {
			_ = p.reloadLocked() // keep serving the old pair on a half-written rotation
		}
	}
	return p.cert, nil
}

func (p *Pair) changed() bool {
	for i, f := range []string{p.certFile, p.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return false
		}
		if (fileStamp{st.ModTime(), st.Size()}) != p.stamp[i] {
			return true
		}
	}
	return false
}

func (p *Pair) reload() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reloadLocked()
}

func (p *Pair) reloadLocked() error {
	var stamps [2]fileStamp
	for i, f := range []string{p.certFile, p.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		stamps[i] = fileStamp{st.ModTime(), st.Size()}
	}
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", p.certFile, p.keyFile, err)
	}
	p.cert, p.stamp = &cert, stamps
	return nil
}

package tlsreload_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/testcerts"
	"github.com/ratelimitd/ratelimitd/internal/tlsreload"
)

func TestRotation(t *testing.T) {
	ca := testcerts.NewCA(t, "rot")
	first := ca.Server(t, "server")
	p, err := tlsreload.Load(first.CertFile, first.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	p.SetClock(func() time.Time { return now })
	c1, _ := p.GetCertificate(nil)

	// Rotate: a new pair replaces the files (a different serial).
	second := ca.Server(t, "server-next")
	for _, f := range [][2]string{{second.CertFile, first.CertFile}, {second.KeyFile, first.KeyFile}} {
		data, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := p.GetCertificate(nil); !bytes.Equal(c.Certificate[0], c1.Certificate[0]) {
		t.Fatal("reloaded before the check interval passed")
	}
	now = now.Add(2 * time.Second)
	c2, _ := p.GetCertificate(nil)
	if bytes.Equal(c2.Certificate[0], c1.Certificate[0]) {
		t.Fatal("the rotated certificate is not served")
	}

	// A half-written rotation keeps the last good pair.
	if err := os.WriteFile(first.KeyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if c, err := p.GetCertificate(nil); err != nil || !bytes.Equal(c.Certificate[0], c2.Certificate[0]) {
		t.Fatalf("after a broken rotation: %v, want the previous pair", err)
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := tlsreload.Load("/nonexistent/cert.pem", "/nonexistent/key.pem"); err == nil {
		t.Fatal("missing files must fail the load")
	}
}

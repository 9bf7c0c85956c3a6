package tlsreload_test

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/testcerts"
	"github.com/ratelimitd/ratelimitd/internal/tlsreload"
	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
)

// newClock is stepped by the tests; the files' own mtimes are real.
func newClock() *fakeclock.Clock { return fakeclock.New(time.Unix(1_800_000_000, 0)) }

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, data)
}

// writeFile replaces name and moves its mtime forward, so a rewrite within
// the file system's timestamp granularity still shows as a change.
func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	var mod time.Time
	if st, err := os.Stat(name); err == nil {
		mod = st.ModTime()
	}
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(name); err == nil && !st.ModTime().After(mod) {
		next := mod.Add(time.Second)
		if err := os.Chtimes(name, next, next); err != nil {
			t.Fatal(err)
		}
	}
}

func leaf(t *testing.T, p *tlsreload.Pair) []byte {
	t.Helper()
	c, err := p.GetCertificate(nil)
	if err != nil || c == nil {
		t.Fatalf("GetCertificate: %v", err)
	}
	return c.Certificate[0]
}

func TestPairRotation(t *testing.T) {
	ca := testcerts.NewCA(t, "rot")
	first := ca.Server(t, "server")
	clock := newClock()
	var errs []error
	p, err := tlsreload.Load(first.CertFile, first.KeyFile, tlsreload.WithClock(clock.Now),
		tlsreload.OnReloadError(func(err error) { errs = append(errs, err) }))
	if err != nil {
		t.Fatal(err)
	}
	c1 := leaf(t, p)

	second := ca.Server(t, "server-next")
	copyFile(t, second.CertFile, first.CertFile)
	copyFile(t, second.KeyFile, first.KeyFile)
	clock.Advance(999 * time.Millisecond)
	if !bytes.Equal(leaf(t, p), c1) {
		t.Fatal("reloaded before the check interval passed")
	}
	clock.Advance(time.Millisecond)
	c2 := leaf(t, p)
	if bytes.Equal(c2, c1) {
		t.Fatal("the rotated certificate is not served a second later")
	}
	if cc, err := p.GetClientCertificate(nil); err != nil || !bytes.Equal(cc.Certificate[0], c2) {
		t.Fatal("GetClientCertificate disagrees with GetCertificate")
	}

	// A half-done rotation (new certificate, old key) keeps the last good
	// pair, reports once, and completes when the key arrives.
	third := ca.Server(t, "server-third")
	copyFile(t, third.CertFile, first.CertFile)
	for range 3 {
		clock.Advance(time.Second)
		if !bytes.Equal(leaf(t, p), c2) {
			t.Fatal("a mismatched pair replaced the good one")
		}
	}
	if len(errs) != 1 {
		t.Fatalf("%d reload errors reported, want 1 per change: %v", len(errs), errs)
	}
	copyFile(t, third.KeyFile, first.KeyFile)
	clock.Advance(time.Second)
	if c3 := leaf(t, p); bytes.Equal(c3, c2) || !bytes.Equal(c3, leaf(t, mustLoad(t, third))) {
		t.Fatal("the completed rotation is not served")
	}

	// A file missing for a moment (a symlink swap) is not an error.
	if err := os.Rename(first.KeyFile, first.KeyFile+".moved"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if c, err := p.GetCertificate(nil); err != nil || c == nil {
		t.Fatalf("with the key missing: %v", err)
	}
	if len(errs) != 1 {
		t.Fatalf("a missing file was reported: %v", errs)
	}
}

func mustLoad(t *testing.T, pair testcerts.Pair) *tlsreload.Pair {
	t.Helper()
	p, err := tlsreload.Load(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPoolRotation(t *testing.T) {
	oldCA, newCA := testcerts.NewCA(t, "old"), testcerts.NewCA(t, "new")
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, bundle, oldCA.CertPEM)
	clock := newClock()
	pool, err := tlsreload.LoadPool(bundle, tlsreload.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	verifies := func(ca *testcerts.CA) bool {
		_, err := ca.Cert.Verify(x509.VerifyOptions{Roots: pool.CertPool()})
		return err == nil
	}
	if !verifies(oldCA) || verifies(newCA) {
		t.Fatal("initial bundle")
	}
	writeFile(t, bundle, newCA.CertPEM)
	clock.Advance(time.Second)
	if verifies(oldCA) || !verifies(newCA) {
		t.Fatal("the rotated bundle is not in use")
	}
	writeFile(t, bundle, []byte("not PEM"))
	clock.Advance(time.Second)
	if !verifies(newCA) {
		t.Fatal("a broken bundle replaced the good one")
	}
}

func TestLoadErrors(t *testing.T) {
	ca := testcerts.NewCA(t, "errs")
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	writeFile(t, garbage, []byte("garbage"))
	pairs := map[string][2]string{
		"missing files":      {"/nonexistent/cert.pem", "/nonexistent/key.pem"},
		"key of another":     {a.CertFile, b.KeyFile},
		"not PEM":            {garbage, garbage},
		"key as certificate": {a.KeyFile, a.KeyFile},
	}
	for name, files := range pairs {
		if _, err := tlsreload.Load(files[0], files[1]); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	for name, file := range map[string]string{"missing": "/nonexistent/ca.pem", "not PEM": garbage} {
		if _, err := tlsreload.LoadPool(file); err == nil {
			t.Errorf("pool %s: loaded", name)
		}
	}
}

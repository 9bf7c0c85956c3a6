// Package structure holds the repository's shape to what a newcomer is
// promised (issue 38): a main that is only main, a README read in minutes.
package structure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const root = "../.."

// lines counts the lines of a file (a last line without "\n" counts).
func lines(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(raw), "\n")
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		n++
	}
	return n
}

// TestThinMain: cmd/ratelimitd is main and its argument wiring; the daemon
// is internal/daemon. Its non-test Go files stay within 300 lines.
func TestThinMain(t *testing.T) {
	const limit = 300
	files, err := filepath.Glob(filepath.Join(root, "cmd", "ratelimitd", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			total += lines(t, f)
		}
	}
	if total == 0 {
		t.Fatal("cmd/ratelimitd has no Go file: has main moved?")
	}
	if total > limit {
		t.Errorf("cmd/ratelimitd has %d non-test Go lines, over %d: the daemon belongs in internal/daemon", total, limit)
	}
}

// TestShortReadme: README.md reads in five minutes; the reference is in
// docs/ (settings.md, compatibility.md, ...).
func TestShortReadme(t *testing.T) {
	const limit = 200
	if n := lines(t, filepath.Join(root, "README.md")); n > limit {
		t.Errorf("README.md has %d lines, over %d: move the reference to docs/", n, limit)
	}
}

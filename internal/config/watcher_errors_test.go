package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNewWatcherInitialFailure(t *testing.T) {
	dir := t.TempDir()
	atomicWrite(t, filepath.Join(dir, "a.yaml"), "domain: a\nnope: 1\n")
	if _, err := NewWatcher(dir); err == nil || !strings.Contains(err.Error(), "a.yaml:2: nope: unknown key") {
		t.Fatalf("NewWatcher = %v, want the load error", err)
	}
	if _, err := NewWatcher(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("NewWatcher of a missing dir succeeded")
	}
}

// Each layer adds only what it knows: the failing path and the package
// prefix appear once each, and the cause stays matchable.
func TestNewWatcherErrorSaysEachThingOnce(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	atomicWrite(t, filepath.Join(bad, "a.yaml"), "domain: a\nnope: 1\n")
	notDir := filepath.Join(dir, "file")
	atomicWrite(t, notDir, "")
	tests := map[string]struct {
		dir    string
		once   []string
		is     error
		prefix string
	}{
		"missing directory": {filepath.Join(dir, "missing"), []string{filepath.Join(dir, "missing"), "config:"}, fs.ErrNotExist,
			"config: initial load: read directory " + filepath.Join(dir, "missing") + ": "},
		"not a directory": {notDir, []string{notDir, "config:"}, nil, "config: initial load: read directory " + notDir + ": "},
		"bad file":        {bad, []string{filepath.Join(bad, "a.yaml"), "config:"}, nil, "config: initial load: " + filepath.Join(bad, "a.yaml") + ":2: "},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewWatcher(tc.dir)
			if err == nil {
				t.Fatal("NewWatcher succeeded")
			}
			if !strings.HasPrefix(err.Error(), tc.prefix) {
				t.Errorf("error %q, want it to start %q", err, tc.prefix)
			}
			for _, w := range tc.once {
				if n := strings.Count(err.Error(), w); n != 1 {
					t.Errorf("error %q says %q %d times, want once", err, w, n)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
		})
	}
}

func TestWatcherLoadOptions(t *testing.T) {
	dir := t.TempDir()
	atomicWrite(t, filepath.Join(dir, "a.yaml"), "domain: d\ndescriptors:\n  - key: a\n")
	atomicWrite(t, filepath.Join(dir, "b.yaml"), "domain: d\ndescriptors:\n  - key: b\n")
	atomicWrite(t, filepath.Join(dir, ".c.yaml"), "broken: [\n")
	if _, err := NewWatcher(dir); err == nil {
		t.Fatal("without options: want duplicate-domain and dotfile errors")
	}
	w, err := NewWatcher(dir, WithLoadOptions(WithMergeDomains(true), WithIgnoreDotfiles(true)))
	if err != nil {
		t.Fatalf("with options: %v", err)
	}
	if !reflect.DeepEqual(w.Current().Domains(), []string{"d"}) {
		t.Errorf("domains = %v", w.Current().Domains())
	}
}

func TestWatcherStartWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	atomicWrite(t, filepath.Join(dir, "a.yaml"), "domain: a\nbogus: 1\n")
	if _, err := NewWatcher(dir); err == nil || !strings.Contains(err.Error(), "a.yaml:2") {
		t.Fatalf("without the option an invalid initial config must fail: %v", err)
	}
	w, reloads := startWatcher(t, dir, WithDebounce(10*time.Millisecond), WithStartWithoutConfig(true))
	if w.Current() != nil {
		t.Fatalf("Current = %v before any valid config, want nil", w.Current())
	}
	atomicWrite(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
	waitFor(t, reloads, "domain a", hasDomains("a"))
	if w.Current() == nil || !w.Current().HasDomain("a") {
		t.Fatal("the first valid config was not put in force")
	}
}

package config

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Watcher tests wait for file-system events, which is I/O: they use
// timeouts, never sleeps that stand in for the passage of time.
const eventTimeout = 10 * time.Second

type reloadResult struct {
	cfg *Config
	err error
}

// atomicWrite replaces path in one rename, so a reload never sees half a
// file and each change is exactly one event for the config file.
func atomicWrite(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startWatcher runs a Watcher for the test's duration and returns the
// channel its reloads are reported on.
func startWatcher(t *testing.T, dir string, opts ...WatcherOption) (*Watcher, <-chan reloadResult) {
	t.Helper()
	reloads := make(chan reloadResult, 16)
	opts = append(opts, WithOnReload(func(cfg *Config, err error) { reloads <- reloadResult{cfg, err} }))
	w, err := NewWatcher(dir, opts...)
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after cancel, want nil", err)
			}
		case <-time.After(eventTimeout):
			t.Error("Run did not return after cancel")
		}
	})
	return w, reloads
}

func nextReload(t *testing.T, reloads <-chan reloadResult) reloadResult {
	t.Helper()
	select {
	case r := <-reloads:
		return r
	case <-time.After(eventTimeout):
		t.Fatal("no reload within the timeout")
		return reloadResult{}
	}
}

// waitFor skips reloads until one satisfies ok (a burst of events may load
// intermediate states first).
func waitFor(t *testing.T, reloads <-chan reloadResult, what string, ok func(reloadResult) bool) reloadResult {
	t.Helper()
	deadline := time.After(eventTimeout)
	for {
		select {
		case r := <-reloads:
			if ok(r) {
				return r
			}
		case <-deadline:
			t.Fatalf("no reload with %s within the timeout", what)
			return reloadResult{}
		}
	}
}

func hasDomains(want ...string) func(reloadResult) bool {
	return func(r reloadResult) bool { return r.err == nil && reflect.DeepEqual(r.cfg.Domains(), want) }
}

func TestWatcherReloadsGoodAndKeepsPreviousOnBad(t *testing.T) {
	dir := t.TempDir()
	atomicWrite(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
	w, reloads := startWatcher(t, dir, WithDebounce(10*time.Millisecond))
	if got := w.Current().Domains(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("initial domains = %v", got)
	}

	atomicWrite(t, filepath.Join(dir, "b.yaml"), "domain: b\n")
	waitFor(t, reloads, "domains a, b", hasDomains("a", "b"))
	if !w.Current().HasDomain("b") {
		t.Fatal("Current lacks the reloaded domain b")
	}

	atomicWrite(t, filepath.Join(dir, "b.yaml"), "domain: b\nbogus: true\n")
	r := nextReload(t, reloads)
	if r.err == nil || r.cfg != nil || !strings.Contains(r.err.Error(), "b.yaml:2: bogus: unknown key") {
		t.Fatalf("bad file: reload = %v, %v; want nil and the located error", r.cfg, r.err)
	}
	if !w.Current().HasDomain("b") || !w.Current().HasDomain("a") {
		t.Fatal("previous config not kept after a bad reload")
	}

	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, reloads, "domain a only", hasDomains("a"))
}

func TestWatcherSymlinkSwap(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		writeFile(t, filepath.Join(root, v, "ratelimit", "config", "c.yaml"), "domain: "+v+"\n")
	}
	current := filepath.Join(root, "current")
	swap := func(target string) {
		t.Helper()
		tmp := filepath.Join(root, "current.tmp")
		if err := os.Symlink(filepath.Join(root, target), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, current); err != nil { // atomic, like envoyproxy's runtime
			t.Fatal(err)
		}
	}
	swap("v1")
	dir := filepath.Join(current, "ratelimit", "config")
	w, reloads := startWatcher(t, dir, WithWatchPath(current), WithDebounce(10*time.Millisecond))
	if !w.Current().HasDomain("v1") {
		t.Fatalf("initial domains = %v", w.Current().Domains())
	}

	swap("v2")
	waitFor(t, reloads, "domain v2", hasDomains("v2"))

	// The watches followed the swap: editing the new target reloads too.
	atomicWrite(t, filepath.Join(root, "v2", "ratelimit", "config", "c.yaml"), "domain: v2b\n")
	waitFor(t, reloads, "domain v2b", hasDomains("v2b"))

	swap("v1")
	waitFor(t, reloads, "domain v1", hasDomains("v1"))
	if !w.Current().HasDomain("v1") {
		t.Fatalf("Current = %v after swapping back", w.Current().Domains())
	}
}

func TestWatcherSkipsUnchangedContentAndLogsOnce(t *testing.T) {
	dir := t.TempDir()
	atomicWrite(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
	core, logs := observer.New(zapcore.InfoLevel)
	_, reloads := startWatcher(t, dir, WithDebounce(0), WithLogger(zap.New(core)))

	// Reloads run in event order: had the chmod reloaded, its report would
	// come before the bad file's.
	if err := os.Chmod(filepath.Join(dir, "a.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	atomicWrite(t, filepath.Join(dir, "bad.yaml"), "domain: a\n") // duplicate domain
	if r := nextReload(t, reloads); r.err == nil || !strings.Contains(r.err.Error(), `duplicate domain "a"`) {
		t.Fatalf("first reload = %v, %v; want the duplicate-domain error", r.cfg, r.err)
	}
	if err := os.Chmod(filepath.Join(dir, "bad.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	atomicWrite(t, filepath.Join(dir, "bad.yaml"), "domain: b\n")
	if r := nextReload(t, reloads); !hasDomains("a", "b")(r) {
		t.Fatalf("second reload = %v, %v; want domains a, b", r.cfg, r.err)
	}
	if n := logs.FilterMessage("config reload failed; keeping the previous config").Len(); n != 1 {
		t.Errorf("reload failure logged %d times, want once", n)
	}
}

func TestWatcherReload(t *testing.T) {
	dir := t.TempDir()
	atomicWrite(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
	var got []reloadResult
	w, err := NewWatcher(dir, WithOnReload(func(cfg *Config, err error) { got = append(got, reloadResult{cfg, err}) }))
	if err != nil {
		t.Fatal(err)
	}
	first := w.Current()

	if err := w.Reload(); err != nil {
		t.Fatalf("Reload of unchanged files: %v", err)
	}
	atomicWrite(t, filepath.Join(dir, "a.yaml"), "domain: [\n")
	if err := w.Reload(); err == nil || !strings.Contains(err.Error(), "a.yaml:1: invalid YAML") {
		t.Fatalf("Reload of a bad file: %v", err)
	}
	if w.Current() == nil || !w.Current().HasDomain("a") {
		t.Fatal("bad Reload dropped the config")
	}
	atomicWrite(t, filepath.Join(dir, "a.yaml"), "domain: z\n")
	if err := w.Reload(); err != nil || !w.Current().HasDomain("z") {
		t.Fatalf("Reload of a fixed file: %v, domains %v", err, w.Current().Domains())
	}
	if len(got) != 3 || got[0].err != nil || got[0].cfg == first || got[1].err == nil || got[1].cfg != nil || got[2].err != nil {
		t.Errorf("OnReload calls = %+v, want success (forced), failure, success", got)
	}
}

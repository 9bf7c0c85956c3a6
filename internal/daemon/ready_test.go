package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// With every port 0, run binds free ports itself and writes them to the
// ready file, where they answer; no caller has to guess a free port.
func TestReadyFileReportsBoundPorts(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(appConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready.json")
	args := []string{"--config", dir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--debug-addr", "127.0.0.1:0", "--ready-file", ready}
	ctx, cancel := context.WithCancel(t.Context())
	logs := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, "test", args, envOf(map[string]string{"LOG_LEVEL": "info"}), logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})

	var body []byte
	testkit.WaitForNil(t, 10*time.Second, "the ready file", func() (err error) {
		body, err = os.ReadFile(ready)
		return err
	})
	var addrs readyAddrs
	if err := json.Unmarshal(body, &addrs); err != nil {
		t.Fatalf("ready file %q: %v", body, err)
	}
	for name, addr := range map[string]string{"grpc": addrs.GRPC, "http": addrs.HTTP, "debug": addrs.Debug} {
		if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
			t.Errorf("%s address %q, want a bound loopback port", name, addr)
		}
	}
	for url, want := range map[string]int{"http://" + addrs.HTTP + "/healthcheck": http.StatusOK, "http://" + addrs.Debug + "/metrics": http.StatusOK} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", url, resp.StatusCode, want)
		}
	}
	if !strings.Contains(logs.String(), addrs.GRPC) {
		t.Errorf("the log does not name the bound gRPC address %s:\n%s", addrs.GRPC, logs.String())
	}
}

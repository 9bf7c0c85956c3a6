package monitoring

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

const trafficConfig = `
domain: mon
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: tokens
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: beta
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: hot
    lease: true
    rate_limit: {unit: hour, requests_per_unit: 1000000}
  - key: kept
    rate_limit: {unit: hour, requests_per_unit: 100, on_store_error: local}
  - key: brief
    rate_limit: {unit: second, requests_per_unit: 100, on_store_error: local}
`

// daemon is the binary under test and its addresses.
type daemon struct {
	grpc, debug, prom string
	client            rlsv3.RateLimitServiceClient
}

// trafficRun starts the binary on Redis with every feature the queries
// chart, makes each event they count happen, and returns the names of
// every series both ports serve (a histogram also by its _bucket, _sum and
// _count names).
func trafficRun(t *testing.T) map[string]bool {
	t.Helper()
	rds := redistest.StartProcess(t)
	dir := t.TempDir()
	configDir := filepath.Join(dir, "config")
	if err := os.Mkdir(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(configDir, "mon.yaml"), trafficConfig)
	d := start(t, dir, configDir, "REDIS_URL="+rds.Addr, "REDIS_TIMEOUT=500ms", "REDIS_BREAKER_PROBE_INTERVAL=50ms",
		"LOCAL_CACHE_SIZE_IN_BYTES=1048576", "USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0", "USE_STATSD=false")

	for range 7 { // 2 over the limit, the last from the local cache
		d.call(t, desc("user", "u"))
	}
	tokens := desc("tokens", "t")
	tokens.HitsAddend = wrapperspb.UInt64(15) // usage recorded past the limit
	d.call(t, tokens)
	for range 3 {
		d.call(t, desc("beta", "b"))
	}
	for range 200 {
		d.call(t, desc("hot", "h"))
	}
	if _, err := d.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "u")}}); err == nil {
		t.Fatal("a request without a domain was answered")
	}

	// A config that does not load, then the good one back.
	write(t, filepath.Join(configDir, "bad.yaml"), "domain: [\n")
	waitFor(t, "a config load error", func() bool { return d.scrape(t, d.prom)["ratelimit_service_config_load_error"] })
	if err := os.Remove(filepath.Join(configDir, "bad.yaml")); err != nil {
		t.Fatal(err)
	}

	// Redis down: errors, then the breaker opens and refuses.
	rds.Stop()
	waitFor(t, "an open breaker refusing calls", func() bool {
		_, _ = d.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "mon", Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "v")}})
		return d.scrape(t, d.debug)["ratelimitd_redis_breaker_refused_total"]
	})
	// on_store_error: local: decided in memory while Redis is down; once it
	// is back, the hour's hits are charged to it and the second's, whose
	// window ended meanwhile, dropped.
	d.call(t, desc("kept", "k"))
	d.call(t, desc("brief", "b"))
	decided := time.Now()
	waitFor(t, "the local second's window to end", func() bool { return time.Now().Truncate(time.Second).After(decided) })
	rds.Restart(t)
	waitFor(t, "locally admitted hits charged back and dropped", func() bool {
		have := d.scrape(t, d.debug)
		return have["ratelimitd_local_reconciled_hits_total"] && have["ratelimitd_local_dropped_hits_total"]
	})

	have := d.scrape(t, d.debug)
	for n := range d.scrape(t, d.prom) {
		have[n] = true
	}
	return have
}

func desc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (d *daemon) call(t *testing.T, descs ...*rlcommon.RateLimitDescriptor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "mon", Descriptors: descs}); err != nil {
		t.Fatal(err)
	}
}

// scrape returns the series names addr's /metrics serves.
func (d *daemon) scrape(t *testing.T, addr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for name, f := range families {
		names[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names
}

// start runs the binary on loopback, every port chosen by the kernel and
// read back from --ready-file: the one make test built ($RATELIMITD_BIN),
// else one built from this tree.
func start(t *testing.T, dir, configDir string, env ...string) *daemon {
	t.Helper()
	bin := os.Getenv("RATELIMITD_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "ratelimitd")
		if out, err := exec.Command("go", "-C", "../..", "build", "-o", bin, "./cmd/ratelimitd").CombinedOutput(); err != nil {
			t.Fatalf("build ratelimitd: %v\n%s", err, out)
		}
	}
	ready := filepath.Join(dir, "ready.json")
	cmd := exec.Command(bin, "--config", configDir, "--ready-file", ready)
	cmd.Env = append(os.Environ(), "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "HOST=127.0.0.1", "PORT=0",
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0", "LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, env...)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("ratelimitd logs:\n%s", logs.String())
		}
	})
	var addrs struct{ GRPC, Debug, Prometheus string }
	waitFor(t, "the ready file", func() bool {
		body, err := os.ReadFile(ready)
		return err == nil && json.Unmarshal(body, &addrs) == nil
	})
	conn, err := grpc.NewClient(addrs.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &daemon{grpc: addrs.GRPC, debug: addrs.Debug, prom: addrs.Prometheus, client: rlsv3.NewRateLimitServiceClient(conn)}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond for up to 15 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 15s", what)
		}
	}
}

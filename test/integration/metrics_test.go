package integration

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// scrape returns /metrics from the debug port.
func scrape(t *testing.T, svc *service) string {
	t.Helper()
	resp, err := http.Get("http://" + svc.debugAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	return string(body)
}

func TestPrometheusMetrics(t *testing.T) {
	t.Parallel()
	svc, _ := startWithRedis(t, itConfig)
	for range 4 {
		if _, err := svc.call(request("it", desc("generic_key", "fixed"))); err != nil {
			t.Fatal(err)
		}
	}
	body := scrape(t, svc)
	for _, want := range []string{
		`ratelimitd_total_hits_total{domain="it",rule="it.generic_key_fixed"} 4`,
		`ratelimitd_within_limit_total{domain="it",rule="it.generic_key_fixed"} 3`,
		`ratelimitd_over_limit_total{domain="it",rule="it.generic_key_fixed"} 1`,
		`ratelimitd_config_load_total{result="success"} 1`,
		`ratelimitd_should_rate_limit_duration_seconds_count{code="OK"} 4`,
		`ratelimitd_redis_round_trip_seconds_count{result="ok"} 4`,
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	return procStatusKiB(t, pid, "VmRSS:")
}

// procStatusKiB reads one kB field of /proc/PID/status.
func procStatusKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestSoakUniqueValuesStayBounded sends 10^5 requests with unique values to
// a detailed_metric rule: the metric series stay capped and memory bounded.
func TestSoakUniqueValuesStayBounded(t *testing.T) {
	t.Parallel()
	const soakConfig = `domain: soak
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 5}
`
	root, _ := newConfigRoot(t, map[string]string{"soak.yaml": soakConfig})
	svc := startService(t, root, "BACKEND_TYPE=memory", "MAX_DETAILED_METRIC_SERIES=100", "LOG_LEVEL=warn")
	pid := svc.cmd.Process.Pid
	load := func(n int) string {
		out, err := exec.Command(loadPath, "-addr", svc.grpcAddr, "-domain", "soak", "-key", "user",
			"-values", "100000", "-clients", "32", "-max-requests", strconv.Itoa(n), "-duration", "120s", "-timeout", "5s").CombinedOutput()
		if err != nil {
			t.Fatalf("rlload: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "failed 0") {
			t.Fatalf("rlload reported failures:\n%s", out)
		}
		return string(out)
	}
	// make test sends 4 x 10^4 values, make test-soak 10^5 (RSS grew by
	// about 1 MiB over 10^5 on a quiet box); the RSS bound scales with them.
	values := testkit.Size(40_000, 100_000)
	load(10_000) // warm up: pools, series, heap
	before := rssKiB(t, pid)
	out := load(values)
	after := rssKiB(t, pid)
	t.Logf("%d unique values: RSS %d KiB -> %d KiB\n%s", values, before, after, out)

	series := 0
	for _, line := range strings.Split(scrape(t, svc), "\n") {
		if strings.HasPrefix(line, `ratelimitd_total_hits_total{domain="soak"`) {
			series++
		}
	}
	if series > 101 {
		t.Fatalf("%d total_hits series for the detailed rule, want at most the cap 100 + overflow", series)
	}
	// One-second keys live in the embedded store at most a second; the
	// bound (64 MiB per 10^5 values) leaves room for the Go heap's growth.
	if growth, bound := after-before, values*64*1024/100_000; growth > bound {
		t.Fatalf("RSS grew by %d KiB over %d unique values, want < %d KiB", growth, values, bound)
	}
}

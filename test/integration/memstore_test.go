package integration

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// TestMemstoreEvictionsCounted: past MEMORY_MAX_KEYS the embedded store
// evicts, and /metrics says how many.
func TestMemstoreEvictionsCounted(t *testing.T) {
	t.Parallel()
	const cfg = "domain: ev\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
	root, _ := newConfigRoot(t, map[string]string{"ev.yaml": cfg})
	svc := startService(t, root, "MEMORY_MAX_KEYS=10")
	for i := range 30 {
		if _, err := svc.call(request("ev", desc("user", fmt.Sprint("u", i)))); err != nil {
			t.Fatal(err)
		}
	}
	body := scrape(t, svc)
	for _, want := range []string{"ratelimitd_memstore_evictions_total 20", "ratelimitd_memstore_keys 10"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(body, "memstore"))
		}
	}
}

// TestMemstoreWindowBoundary: 200,000 fixed-window counters of the embedded
// store expire at the same 10 s boundary; calls across it must not pay for
// the expiry (they paid 72 ms for 178k counters when the first call after
// the boundary swept them all). Figures are logged; the bound asserted is a
// hang guard (testkit.Slack) because the machine is shared.
//
// It waits for real boundaries, up to 20 s, so only make test-soak runs it
// (RATELIMITD_SOAK set); make test covers the same on memstore's fake clock:
// TestRequestsLeaveExpiryToTheSweeper and TestSweeperFreesMemoryOnceIdle.
func TestMemstoreWindowBoundary(t *testing.T) {
	t.Parallel()
	if testing.Short() || !testkit.Soak() {
		t.Skip("fills 200,000 keys and waits for a window boundary; make test-soak runs it")
	}
	const keys = 200_000
	const cfg = "domain: wb\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, unit_multiplier: 10, requests_per_unit: 5}\n  - key: probe\n    rate_limit: {unlimited: true}\n"
	root, _ := newConfigRoot(t, map[string]string{"wb.yaml": cfg})
	svc := startService(t, root)

	// Start right after a boundary, so the fill ends inside one window.
	window := 10 * time.Second
	time.Sleep(time.Until(time.Now().Truncate(window).Add(window + 50*time.Millisecond)))
	filledIn := time.Now().Truncate(window)
	fillUsers(t, svc, keys)
	boundary := filledIn.Add(window)
	if time.Now().After(boundary.Add(-300 * time.Millisecond)) {
		// About 2 s here; a store this slow is the failure this test exists for.
		t.Fatalf("filling %d keys took past the window's end (%s)", keys, time.Since(filledIn))
	}
	if body := scrape(t, svc); !strings.Contains(body, "ratelimitd_memstore_keys "+strconv.Itoa(keys)) {
		t.Fatalf("store does not hold %d keys:\n%s", keys, grepLines(body, "memstore"))
	}
	fullHeap, fullRSS := metricValue(t, scrape(t, svc), "go_memstats_heap_inuse_bytes"), rssKiB(t, svc.cmd.Process.Pid)

	// Probe from 300 ms before the boundary to 1.5 s after it.
	time.Sleep(time.Until(boundary.Add(-300 * time.Millisecond)))
	var before, after []time.Duration
	probe := request("wb", desc("probe", "x"))
	for time.Now().Before(boundary.Add(1500 * time.Millisecond)) {
		start := time.Now()
		if _, err := svc.call(probe); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if start.Before(boundary) {
			before = append(before, took)
		} else {
			after = append(after, took)
		}
		time.Sleep(time.Millisecond)
	}
	// And the counters themselves, right after their expiry, read fresh.
	resp, err := svc.call(request("wb", desc("user", "7")))
	if err != nil || resp.GetStatuses()[0].GetLimitRemaining() != 4 {
		t.Errorf("an expired counter after the boundary: %v %v, want remaining 4", resp, err)
	}
	slices.Sort(before)
	slices.Sort(after)
	t.Logf("%d counters expiring at one boundary: %d calls before it p50 %s p99 %s max %s; %d after it p50 %s p99 %s max %s",
		keys, len(before), pct(before, .5), pct(before, .99), before[len(before)-1], len(after), pct(after, .5), pct(after, .99), after[len(after)-1])
	if worst := after[len(after)-1]; worst > before[len(before)-1]+testkit.Slack {
		t.Errorf("slowest call after the boundary %s, before it %s", worst, before[len(before)-1])
	}
	testkit.WaitFor(t, 10*time.Second, "the sweep to drop the expired counters", func() bool {
		return strings.Contains(scrape(t, svc), "ratelimitd_memstore_keys 1\n") // user 7, just written
	})
	// Idle now: the sweeper hands the memory back.
	var idleHeap float64
	testkit.WaitFor(t, 10*time.Second, "the heap to shrink while idle", func() bool {
		idleHeap = metricValue(t, scrape(t, svc), "go_memstats_heap_inuse_bytes")
		return idleHeap < fullHeap/2
	})
	t.Logf("heap in use %.0f MiB with %d counters, %.0f MiB once they expired and the store was idle; RSS %d MiB -> %d MiB",
		fullHeap/(1<<20), keys, idleHeap/(1<<20), fullRSS/1024, rssKiB(t, svc.cmd.Process.Pid)/1024)
}

// fillUsers counts one hit of users 0 to n-1 of domain wb, 64 to a
// request, from 4 callers.
func fillUsers(t *testing.T, svc *service, n int) {
	const batch = 64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for start := w * batch; start < n; start += 4 * batch {
				req := &rlsv3.RateLimitRequest{Domain: "wb"}
				for i := start; i < min(start+batch, n); i++ {
					req.Descriptors = append(req.Descriptors, desc("user", strconv.Itoa(i)))
				}
				if _, err := svc.call(req); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

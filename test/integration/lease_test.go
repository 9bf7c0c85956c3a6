package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// leaseLimit is every hot counter's limit per day; leaseBucketT is the
// gcra's emission interval (a day / leaseLimit).
const (
	leaseLimit   = 1000
	leaseBucketT = 24 * time.Hour / leaseLimit
)

// leaseConfig leases the hot counters by their own lease: true and
// "returned" by LEASE_ENABLED; "exact" opts out.
const leaseConfig = `domain: lease
descriptors:
  - key: hot
    value: fixed_window
    lease: true
    rate_limit: {unit: day, requests_per_unit: 1000}
  - key: hot
    value: sliding_window
    lease: true
    rate_limit: {unit: day, requests_per_unit: 1000, algorithm: sliding_window}
  - key: hot
    value: gcra
    lease: true
    rate_limit: {unit: day, requests_per_unit: 1000, algorithm: gcra}
  - key: returned
    rate_limit: {unit: day, requests_per_unit: 100000}
  - key: exact
    lease: false
    rate_limit: {unit: day, requests_per_unit: 100000}
`

// TestLeasesNeverOverAdmit runs two replicas of the binary with leases on
// against one Redis (a single node, then a three-master Cluster): hot
// counters offered three times their limit across both replicas admit at
// most the limit (a bucket: its burst plus what it refilled meanwhile),
// most of it answered from leased blocks without Redis; and a replica
// stopped with SIGTERM gives its unused hits back before it exits, so the
// counter holds exactly the hits admitted.
func TestLeasesNeverOverAdmit(t *testing.T) {
	t.Parallel()
	for _, b := range []backend{redisBackend, clusterBackend} {
		t.Run(b.name, func(t *testing.T) {
			// The limits are per day: a replica's run must not straddle
			// midnight UTC, where a fixed window may admit its limit twice.
			roomInWindow(t, 24*time.Hour, 15*time.Second)
			root, configDir := newConfigRoot(t, map[string]string{"lease.yaml": leaseConfig})
			storeEnv, _ := b.start(t)
			env := append(storeEnv, "REDIS_POOL_SIZE=16", "LEASE_ENABLED=true", "LOG_LEVEL=info")
			replicas := []*service{startService(t, root, env...), startService(t, root, env...)}
			checkHotNeverOverAdmit(t, replicas)
			checkLeasesReturned(t, replicas, configDir)

			// lease: false stays per decision under LEASE_ENABLED: every answer is Redis's.
			for i := range 3 {
				resp, err := replicas[1].call(request("lease", desc("exact", "e")))
				if err != nil {
					t.Fatal(err)
				}
				if left := resp.GetStatuses()[0].GetLimitRemaining(); left != uint32(100000-1-i) {
					t.Fatalf("lease: false, call %d: %d left, want %d", i, left, 100000-1-i)
				}
			}
		})
	}
}

// checkHotNeverOverAdmit offers the hot counters three times their limit
// across the replicas: at most the limit is admitted (a bucket: its burst
// plus what it refilled meanwhile), at least 90% of it, and every replica
// answers hits from leased blocks.
func checkHotNeverOverAdmit(t *testing.T, replicas []*service) {
	for _, alg := range []string{"fixed_window", "sliding_window", "gcra"} {
		start := time.Now()
		got := countAdmitted(t, replicas, 16, 3*leaseLimit/16, request("lease", desc("hot", alg)))
		bound := int64(leaseLimit)
		if alg == "gcra" {
			bound += int64(time.Since(start)/leaseBucketT) + 1
		}
		t.Logf("%s: admitted %d of %d offered, limit %d (%.3f)", alg, got, 3*leaseLimit, leaseLimit, float64(got)/leaseLimit)
		if got > bound {
			t.Errorf("%s: admitted %d across two replicas, more than the limit allows (%d)", alg, got, bound)
		}
		if got < leaseLimit*9/10 {
			t.Errorf("%s: admitted only %d of the limit %d with the load at three times it", alg, got, leaseLimit)
		}
	}
	// How much is answered locally depends on the rate each replica
	// sees, which a loaded machine changes: leasetest's "hot" counts
	// it on a fake clock. Here every replica leases and uses its blocks.
	for i, r := range replicas {
		body := scrape(t, r)
		hits, blocks := metricValue(t, body, "ratelimitd_lease_local_hits_total"), metricValue(t, body, "ratelimitd_lease_blocks_total")
		t.Logf("replica %d: %v blocks, %v hits answered locally", i, blocks, hits)
		if blocks == 0 || hits == 0 {
			t.Errorf("replica %d leased %v blocks and answered %v hits from them", i, blocks, hits)
		}
	}
}

// checkLeasesReturned sends hits far below the limit of "returned" to one
// replica, then stops it with SIGTERM: the unused rest of its blocks goes
// back to Redis. Then the same on the other replica, ended by a reload
// that changes the rule.
func checkLeasesReturned(t *testing.T, replicas []*service, configDir string) {
	const sent = 800
	if got := countAdmitted(t, replicas[:1], 16, sent/16, request("lease", desc("returned", "r"))); got != sent {
		t.Fatalf("admitted %d of %d far below the limit", got, sent)
	}
	if out := metricValue(t, scrape(t, replicas[0]), "ratelimitd_lease_outstanding_hits"); out == 0 {
		t.Fatalf("no unused hits held after %d hits: nothing to return", sent)
	}
	replicas[0].stop()
	if !strings.Contains(replicas[0].logs.String(), "leases returned") {
		t.Errorf("the stopped replica did not log its returns:\n%s", replicas[0].logs.String())
	}
	resp, err := replicas[1].call(request("lease", withHits(desc("returned", "r"), 0)))
	if err != nil {
		t.Fatal(err)
	}
	if left := resp.GetStatuses()[0].GetLimitRemaining(); left != 100000-sent {
		t.Errorf("after SIGTERM the counter has %d left, want %d: the stopped replica kept %d hits charged", left, 100000-sent, 100000-sent-int(left))
	}
	// A reload that changes a rule ends every lease: the unused hits go back.
	if got := countAdmitted(t, replicas[1:], 16, sent/16, request("lease", desc("returned", "r"))); got != sent {
		t.Fatalf("admitted %d of %d far below the limit", got, sent)
	}
	if out := metricValue(t, scrape(t, replicas[1]), "ratelimitd_lease_outstanding_hits"); out == 0 {
		t.Fatalf("no unused hits held after %d hits: nothing to return", sent)
	}
	writeFile(t, filepath.Join(configDir, "lease.yaml"), strings.Replace(leaseConfig, "requests_per_unit: 100000}\n", "requests_per_unit: 100001}\n", 1))
	testkit.WaitFor(t, 10*time.Second, "the reload to return the leases", func() bool {
		return metricValue(t, scrape(t, replicas[1]), "ratelimitd_lease_outstanding_hits") == 0
	})
	resp, err = replicas[1].call(request("lease", withHits(desc("returned", "r"), 0)))
	if err != nil {
		t.Fatal(err)
	}
	if left := resp.GetStatuses()[0].GetLimitRemaining(); left != 100001-2*sent {
		t.Errorf("after the reload the counter has %d left, want %d", left, 100001-2*sent)
	}
}

package integration

import (
	"testing"
	"time"
)

// Two replicas with the local cache (and leases) on one Redis, as
// deployed: a refund sent to replica A of a budget replica B has cached as
// spent reaches B over Redis pub/sub, and B admits again at once, without
// waiting for LOCAL_CACHE_MAX_AGE (set far beyond the test). The daemon's
// wiring (the refund subscription found under the lease decorator) and the
// take script's publishing both have to work.
func TestRefundReachesTheOtherReplica(t *testing.T) {
	t.Parallel()
	_, rds := startWithRedis(t, itConfig)
	env := []string{"LOCAL_CACHE_SIZE_IN_BYTES=1048576", "LOCAL_CACHE_MAX_AGE=1h", "LEASE_ENABLED=true"}
	a := startWithRedisAt(t, rds.Addr, itConfig, env...)
	b := startWithRedisAt(t, rds.Addr, itConfig, env...)
	spend := request("it", withHits(desc("generic_key", "hits"), 10))
	if resp, err := a.call(spend); err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("10 hits of 10 on A: %v, %v", resp, err)
	}
	one := request("it", desc("generic_key", "hits"))
	for i := range 3 { // Redis's denial, then B's cached ones
		if resp, err := b.call(one); err != nil || resp.GetOverallCode() != over {
			t.Fatalf("B's hit %d on a spent budget: %v, %v", i, resp, err)
		}
	}
	refund := withHits(desc("generic_key", "hits"), 4)
	refund.IsNegativeHits = true
	if resp, err := a.call(request("it", refund)); err != nil || resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetLimitRemaining() != 4 {
		t.Fatalf("refund of 4 on A: %v, %v", resp, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := b.call(one)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() == ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replica B still answers the refunded budget OVER_LIMIT")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

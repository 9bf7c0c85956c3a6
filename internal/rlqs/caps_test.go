package rlqs_test

import (
	"fmt"
	"testing"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// tenantRules gives every tenant a counter of its own.
const tenantRules = `
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 600}
`

// tenants is a report of n new buckets of tenants from..from+n-1, each
// with allowed and denied requests.
func tenants(from, n int, allowed, denied uint64) *rlqsv3.RateLimitQuotaUsageReports {
	r := &rlqsv3.RateLimitQuotaUsageReports{Domain: "edge"}
	for i := from; i < from+n; i++ {
		r.BucketQuotaUsages = append(r.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:    &rlqsv3.BucketId{Bucket: map[string]string{"tenant": fmt.Sprint(i)}},
			TimeElapsed: &durationpb.Duration{}, NumRequestsAllowed: allowed, NumRequestsDenied: denied,
		})
	}
	return r
}

// assigned counts the token buckets in resps.
func assigned(resps []*rlqsv3.RateLimitQuotaResponse) int {
	n := 0
	for _, r := range resps {
		for _, a := range r.GetBucketAction() {
			if a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket() != nil {
				n++
			}
		}
	}
	return n
}

// TestManyBuckets: one report of 12,000 buckets, each its own counter,
// on real Redis: every bucket gets a token bucket. A script unpacks its
// keys onto Lua's stack, which holds about 8,000: the report's ops go in
// store calls of at most 1,024.
func TestManyBuckets(t *testing.T) {
	rs := redistest.Start(t)
	// A window's start, not the wall clock: 0.5 s before a minute's end no
	// bucket gets a token bucket, and the test failed when it ran then.
	clock := rlqstest.NewClock(windowStart)
	rep := redisReplica(t, rs.Addr, newRules(t, tenantRules), clock, rlqs.WithMaxBuckets(20_000))
	resps, err := exchange(t, rep.addr, tenants(0, 12_000, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if n := assigned(resps); n != 12_000 {
		t.Fatalf("%d of 12,000 buckets assigned", n)
	}
	st := rep.srv.Stats()
	if st.StoreErrors != 0 || st.StoreCalls < 12 || len(resps) < 12 {
		t.Errorf("%d store calls (%d failed), %d responses; want at least 12 of each (1,024 ops, 1,000 actions at most), none failed", st.StoreCalls, st.StoreErrors, len(resps))
	}
}

// TestBucketCap: the cap counts the buckets of every stream. Past it, a
// bucket gets no assignment and is not kept, but the requests Envoy
// reports it allowed are recorded in its counter; a stream that ends
// frees its buckets' places.
func TestBucketCap(t *testing.T) {
	clock := rlqstest.NewClock(windowStart)
	st := memstore.New(memstore.WithClock(clock.Now))
	rep := startReplica(t, newRules(t, tenantRules), st, clock, rlqs.WithMaxBuckets(5))
	a := openStream(t, rep.addr)
	if n := a.report(t, tenants(0, 3, 0, 1)); n != 3 {
		t.Fatalf("first stream: %d of 3 assigned", n)
	}
	b := openStream(t, rep.addr)
	if n := b.report(t, tenants(10, 4, 2, 1)); n != 2 {
		t.Fatalf("second stream: %d of 4 assigned, want the 2 places left", n)
	}
	if s := rep.srv.Stats(); s.Buckets != 5 || s.Untracked != 2 || s.Recorded != 4 {
		t.Errorf("%d buckets, %d reports of buckets past the cap, %d hits recorded; want 5, 2, and their 2 x 2 allowed", s.Buckets, s.Untracked, s.Recorded)
	}
	a.close(t)
	waitQuick(t, "the first stream's buckets to go", func() bool { return rep.srv.Stats().Buckets == 2 })
	if n := b.report(t, tenants(12, 2, 0, 1)); n != 2 {
		t.Errorf("second stream again: %d of the 2 buckets past the cap assigned once there was room", n)
	}
}

// client is a test's end of one stream.
type client struct {
	s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient
}

func openStream(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return &client{s: s}
}

// report sends r and returns how many token buckets the response assigns.
func (c *client) report(t *testing.T, r *rlqsv3.RateLimitQuotaUsageReports) int {
	t.Helper()
	if err := c.s.Send(r); err != nil {
		t.Fatal(err)
	}
	resp, err := c.s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return assigned([]*rlqsv3.RateLimitQuotaResponse{resp})
}

func (c *client) close(t *testing.T) {
	t.Helper()
	_ = c.s.CloseSend()
	if _, err := c.s.Recv(); err == nil {
		t.Fatal("a response after closing")
	}
}

package rlqstest

import (
	"net"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// recorder is an RLQS server that keeps every report it receives.
type recorder struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer
	mu      sync.Mutex
	reports []*rlqsv3.RateLimitQuotaUsageReports
}

func (r *recorder) StreamRateLimitQuotas(s rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.reports = append(r.reports, m)
		r.mu.Unlock()
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reports)
}

func (r *recorder) last() *rlqsv3.RateLimitQuotaUsageReports {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reports[len(r.reports)-1]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestReports: a bucket's first request is reported at once, alone, with
// time_elapsed 0; all buckets every 5 s (whatever else is configured),
// counts reset; while the stream is down and cannot start, reports are
// built (their counts reset) and dropped, a new bucket's first one too;
// the next tick starts the stream again.
func TestReports(t *testing.T) {
	rec := &recorder{}
	gs := grpc.NewServer()
	rlqsv3.RegisterRateLimitQuotaServiceServer(gs, rec)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	down := true
	dial := func(addr string) (*grpc.ClientConn, error) {
		if down {
			return nil, net.ErrClosed
		}
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	clock := NewClock(time.Unix(1000, 0))
	e := NewEnvoy(Settings{Domain: "d", NoAssignment: blanket(typev3.RateLimitStrategy_DENY_ALL), Addrs: []string{ln.Addr().String()}}, clock, dial)
	t.Cleanup(e.Close)

	e.Request(id) // the stream cannot start: the first report is dropped
	admits(e, 4)
	clock.Advance(ReportInterval)
	e.Tick() // and so is the periodic one, its counts reset
	if e.Dropped() != 2 || rec.count() != 0 {
		t.Fatalf("stream down: %d reports dropped, %d received; want 2, 0", e.Dropped(), rec.count())
	}
	down = false
	admits(e, 3)
	clock.Advance(ReportInterval - time.Millisecond)
	e.Tick()
	if rec.count() != 0 {
		t.Fatal("reported before 5 s")
	}
	clock.Advance(time.Millisecond)
	e.Tick()
	waitFor(t, "the report", func() bool { return rec.count() == 1 })
	u := rec.last().GetBucketQuotaUsages()
	if len(u) != 1 || u[0].GetNumRequestsDenied() != 3 || u[0].GetTimeElapsed().GetSeconds() != 5 || rec.last().GetDomain() != "d" {
		t.Fatalf("the report after the stream started again: %v; want the 3 requests since the dropped one, 5 s", rec.last())
	}
	other := map[string]string{"b": "2"}
	clock.Advance(1500 * time.Millisecond)
	e.Request(other)
	waitFor(t, "the new bucket's report", func() bool { return rec.count() == 2 })
	if u := rec.last().GetBucketQuotaUsages(); len(u) != 1 || u[0].GetBucketId().GetBucket()["b"] != "2" || u[0].GetTimeElapsed().GetSeconds() != 0 || u[0].GetNumRequestsDenied() != 1 {
		t.Fatalf("a new bucket's first report: %v; want it alone, 0 s, its one request", rec.last())
	}
	clock.Advance(ReportInterval - 1500*time.Millisecond)
	e.Tick()
	waitFor(t, "the next report", func() bool { return rec.count() == 3 })
	if u := rec.last().GetBucketQuotaUsages(); len(u) != 2 || u[1].GetTimeElapsed().GetSeconds() != 3 || u[1].GetNumRequestsDenied() != 0 {
		t.Fatalf("the next periodic report: %v; want both buckets, the new one's 3.5 s as 3, no request", rec.last())
	}
}

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// tenantRules gives every tenant a counter of its own.
const tenantRules = `
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 600}
`

// TestRLQSMemory: ten Envoys report 10,000 buckets each (a counter each)
// to the binary on Redis, three times a second apart. The server tracks
// and assigns RLQS_MAX_BUCKETS of them (its default), the others get no
// assignment, and the process's resident set (VmRSS after, VmHWM at its
// peak) stays under 200 MB. The figures are logged for docs/rlqs.md
// (RLQS_MEM_ENV adds settings, say "RLQS_MAX_BUCKETS=50000
// GOMEMLIMIT=120MiB", to measure others; the cap check then fails).
func TestRLQSMemory(t *testing.T) {
	t.Parallel()
	const streams, ids, rounds = 10, 10_000, 3
	rs := redistest.Start(t)
	root, _ := newConfigRoot(t, map[string]string{"edge.yaml": tenantRules})
	svc := startService(t, root, append(redisEnv(rs.Addr), strings.Fields(os.Getenv("RLQS_MEM_ENV"))...)...)
	pid := svc.cmd.Process.Pid
	base := rssKiB(t, pid)
	// A new bucket's grant charged in its window's last second lapses with
	// the window, and the bucket asks again after half a reporting
	// interval, later than these rounds (internal/rlqs's tests step a
	// clock from a window's start for the same reason): the reports go
	// with 15 s or more of the minute left.
	if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 15*time.Second {
		time.Sleep(left)
	}
	var sent, done sync.WaitGroup
	release := make(chan struct{})
	assigned := make([]int, streams)
	for s := range streams {
		sent.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			assigned[s] = reportBuckets(t, svc.grpcAddr, s, ids, rounds, sent.Done, release)
		}()
	}
	sent.Wait()
	// Every report handled while every stream is open: a stream that
	// ended would have freed its buckets' places.
	handled := fmt.Sprintf("ratelimitd_rlqs_reports_total %d\n", streams*rounds)
	testkit.WaitFor(t, time.Minute, "every report handled", func() bool { return strings.Contains(scrape(t, svc), handled) })
	tracked := fmt.Sprintf("ratelimitd_rlqs_buckets %d\n", rlqs.DefaultMaxBuckets)
	if m := scrape(t, svc); !strings.Contains(m, tracked) {
		t.Errorf("/metrics lacks %q", tracked)
	}
	rss, peak := rssKiB(t, pid), peakRSSKiB(t, pid)
	close(release)
	done.Wait()
	t.Logf("%d streams x %d buckets, %d reports each: VmRSS %d MB (before %d MB), VmHWM %d MB; assigned per stream %v",
		streams, ids, rounds, rss>>10, base>>10, peak>>10, assigned)
	if peak > 200<<10 {
		t.Errorf("peak resident set %d MB, want under 200 MB", peak>>10)
	}
	total := 0
	for _, n := range assigned {
		total += n
	}
	if total != rlqs.DefaultMaxBuckets {
		t.Errorf("%d buckets assigned, want the cap's %d (the others none)", total, rlqs.DefaultMaxBuckets)
	}
}

// reportBuckets opens one stream, sends rounds reports of ids buckets
// (each bucket's requests denied: Envoy's DENY_ALL before an assignment)
// a second apart, calls sent, and once release closes ends the stream
// and returns how many buckets were assigned.
func reportBuckets(t *testing.T, addr string, s, ids, rounds int, sent func(), release <-chan struct{}) int {
	sent = sync.OnceFunc(sent)
	defer sent()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Error(err)
		return 0
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Error(err)
		return 0
	}
	assigned := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			resp, err := cs.Recv()
			if err != nil {
				return
			}
			for _, a := range resp.GetBucketAction() {
				assigned[a.GetBucketId().GetBucket()["tenant"]] = true
			}
		}
	}()
	for r := range rounds {
		msg := &rlqsv3.RateLimitQuotaUsageReports{Domain: "edge"}
		for i := range ids {
			msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
				BucketId:          &rlqsv3.BucketId{Bucket: map[string]string{"tenant": fmt.Sprintf("s%d-%d", s, i)}},
				TimeElapsed:       &durationpb.Duration{Seconds: int64(r)},
				NumRequestsDenied: 1,
			})
		}
		if err := cs.Send(msg); err != nil {
			t.Error(err)
			return 0
		}
		time.Sleep(time.Second)
	}
	sent()
	<-release
	_ = cs.CloseSend()
	<-done
	return len(assigned)
}

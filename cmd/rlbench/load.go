package main

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// loadResult is what one timed load run saw from the client side.
type loadResult struct {
	calls, failed int
	elapsed       time.Duration
	p50, p99      time.Duration
}

// requests builds n distinct requests up front so the generator spends
// little CPU of its own: it shares the machine with what it measures.
func requests(domain, key string, descriptors, n int) []*rlsv3.RateLimitRequest {
	out := make([]*rlsv3.RateLimitRequest, n)
	for i := range out {
		req := &rlsv3.RateLimitRequest{Domain: domain}
		for d := range descriptors {
			req.Descriptors = append(req.Descriptors, &rlcommon.RateLimitDescriptor{
				Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: key, Value: "v" + strconv.Itoa((i*descriptors+d)%100000)}},
			})
		}
		out[i] = req
	}
	return out
}

// load keeps `concurrency` calls in flight on one connection (as Envoy and
// ghz do) for d, each with its own deadline.
func load(conn *grpc.ClientConn, reqs []*rlsv3.RateLimitRequest, concurrency int, d, timeout time.Duration) loadResult {
	client := rlsv3.NewRateLimitServiceClient(conn)
	var next atomic.Uint64
	lat := make([][]time.Duration, concurrency)
	failed := make([]int, concurrency)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 4096)
			for time.Now().Before(stop) {
				req := reqs[next.Add(1)%uint64(len(reqs))]
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				began := time.Now()
				_, err := client.ShouldRateLimit(ctx, req)
				mine = append(mine, time.Since(began))
				cancel()
				if err != nil {
					failed[w]++
				}
			}
			lat[w] = mine
		}()
	}
	wg.Wait()
	res := loadResult{elapsed: time.Since(start)}
	var all []time.Duration
	for w := range concurrency {
		all = append(all, lat[w]...)
		res.failed += failed[w]
	}
	res.calls = len(all)
	if len(all) > 0 {
		slices.Sort(all)
		res.p50 = all[len(all)/2]
		res.p99 = all[min(len(all)-1, len(all)*99/100)]
	}
	return res
}

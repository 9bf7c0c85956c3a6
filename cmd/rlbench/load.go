package main

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
		out[i] = request(domain, key, descriptors, func(d int) string { return "v" + strconv.Itoa((i*descriptors+d)%100000) })
	}
	return out
}

// load keeps `concurrency` calls in flight for d, each with its own
// deadline, on one connection per replica (as Envoy and ghz do), the
// calls spread evenly over them. With rate > 0 the k-th call starts no
// earlier than k/rate seconds in (an open-loop schedule, as a fleet of
// gateways sends), so that targets compared at one rate do the same work
// per second, not as much as the box lets each do; a target slower than
// rate is driven as fast as it answers.
func load(conns []*grpc.ClientConn, reqs []*rlsv3.RateLimitRequest, concurrency int, d, timeout time.Duration, rate float64) loadResult {
	clients := make([]rlsv3.RateLimitServiceClient, len(conns))
	for i, c := range conns {
		clients[i] = rlsv3.NewRateLimitServiceClient(c)
	}
	var next, slots atomic.Uint64
	lat := make([][]time.Duration, concurrency)
	failed := make([]int, concurrency)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := clients[w%len(clients)]
			mine := make([]time.Duration, 0, 4096)
			for time.Now().Before(stop) {
				if rate > 0 {
					k := slots.Add(1) - 1
					at := start.Add(time.Duration(float64(k) * float64(time.Second) / rate))
					if !at.Before(stop) {
						break
					}
					time.Sleep(time.Until(at))
				}
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

// Command rlload is a bounded load generator for a running ratelimitd: it
// sends ShouldRateLimit calls from concurrent clients for a fixed time or
// count and prints throughput and latency percentiles. It only ever targets
// the address it is given (loopback in `make bench`).
//
//	go run ./cmd/rlload -addr 127.0.0.1:8081 -domain example -duration 10s -clients 32
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type options struct {
	addr        string
	domain      string
	key         string
	values      int
	descriptors int
	clients     int
	duration    time.Duration
	maxRequests int
	timeout     time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8081", "ratelimitd gRPC address")
	flag.StringVar(&o.domain, "domain", "example", "rate limit domain")
	flag.StringVar(&o.key, "key", "remote_address", "descriptor key")
	flag.IntVar(&o.values, "values", 1000, "distinct descriptor values (spread over keys)")
	flag.IntVar(&o.descriptors, "descriptors", 1, "descriptors per request")
	flag.IntVar(&o.clients, "clients", 32, "concurrent clients")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long to send (bounded)")
	flag.IntVar(&o.maxRequests, "max-requests", 2_000_000, "stop after this many requests")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Millisecond, "per-call deadline, like Envoy's default")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "rlload:", err)
		os.Exit(1)
	}
}

type tally struct {
	latencies        []time.Duration
	ok, over, failed int
}

func run(o options) error {
	if o.clients < 1 || o.descriptors < 1 || o.values < 1 || o.duration <= 0 {
		return errors.New("clients, descriptors, values and duration must be positive")
	}
	conn, err := grpc.NewClient(o.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)

	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	perClient := o.maxRequests / o.clients
	results := make([]tally, o.clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range o.clients {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			t := &results[c]
			for i := 0; i < perClient && ctx.Err() == nil; i++ {
				req := &rlsv3.RateLimitRequest{Domain: o.domain}
				for d := range o.descriptors {
					v := (c*perClient + i + d) % o.values
					req.Descriptors = append(req.Descriptors, &rlcommon.RateLimitDescriptor{
						Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: o.key, Value: "v" + strconv.Itoa(v)}},
					})
				}
				callCtx, callCancel := context.WithTimeout(context.Background(), o.timeout)
				began := time.Now()
				resp, err := client.ShouldRateLimit(callCtx, req)
				t.latencies = append(t.latencies, time.Since(began))
				callCancel()
				switch {
				case err != nil:
					t.failed++
				case resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
					t.over++
				default:
					t.ok++
				}
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	report(o, results, elapsed)
	return nil
}

func report(o options, results []tally, elapsed time.Duration) {
	var all []time.Duration
	var sum tally
	for _, t := range results {
		all = append(all, t.latencies...)
		sum.ok += t.ok
		sum.over += t.over
		sum.failed += t.failed
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(float64(len(all))*p))]
	}
	fmt.Printf("requests %d in %s (%d clients, %d descriptors each): %.0f req/s\n",
		len(all), elapsed.Round(time.Millisecond), o.clients, o.descriptors, float64(len(all))/elapsed.Seconds())
	fmt.Printf("ok %d, over_limit %d, failed %d\n", sum.ok, sum.over, sum.failed)
	fmt.Printf("latency p50 %s p90 %s p99 %s max %s\n", pct(0.50), pct(0.90), pct(0.99), pct(1))
}

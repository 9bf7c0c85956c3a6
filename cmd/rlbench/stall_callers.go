package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/procstat"
)

// callers are the stall scenario's callers, each ready with its request
// and waiting for begin, so that they start together.
type callers struct {
	begin     chan struct{}
	lastStart atomic.Int64 // Unix nanoseconds the last caller called at
	wait      func() map[codes.Code]int
}

func readyCallers(o options, conns []*grpc.ClientConn, round int) *callers {
	c := &callers{begin: make(chan struct{})}
	var mu sync.Mutex
	got := map[codes.Code]int{}
	var wg, ready sync.WaitGroup
	for i := range o.concurrency {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			client, req := rlsv3.NewRateLimitServiceClient(conns[i%len(conns)]), stallRequest(o, round, i)
			ready.Done()
			<-c.begin
			c.lastStart.Store(time.Now().UnixNano())
			code := call(client, req, o.timeout)
			mu.Lock()
			got[code]++
			mu.Unlock()
		}()
	}
	ready.Wait()
	c.wait = func() map[codes.Code]int { wg.Wait(); return got }
	return c
}

// pollArrivals reads t's arrivals every 100 ms until stop, which returns
// the most seen.
func pollArrivals(t *target) (stop func() int) {
	var most atomic.Int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if n := int64(t.arrived()); n > most.Load() {
				most.Store(n)
			}
		}
	}()
	return func() int {
		close(quit)
		<-done
		return int(most.Load())
	}
}

// sleep has Redis sleep d (DEBUG SLEEP) and returns when it wakes.
func (r *redisConn) sleep(d time.Duration) error {
	_ = r.c.SetDeadline(time.Now().Add(d + time.Minute))
	if _, err := r.c.Write([]byte("DEBUG SLEEP " + strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "\r\n")); err != nil {
		return err
	}
	reply, err := r.r.ReadString('\n')
	if err != nil {
		return err
	}
	if reply = strings.TrimSpace(reply); reply != "+OK" {
		return fmt.Errorf("DEBUG SLEEP: %s", reply)
	}
	return nil
}

// stallRequest is caller i's request: a counter of its own under the
// scenario's key, so every answer is an admission.
func stallRequest(o options, round, i int) *rlsv3.RateLimitRequest {
	return request(o.domain, o.key, 1, func(int) string { return "r" + strconv.Itoa(round) + "c" + strconv.Itoa(i) })
}

func call(c rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest, timeout time.Duration) codes.Code {
	_, code := timedCall(c, req, timeout)
	return code
}

func timedCall(c rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest, timeout time.Duration) (time.Duration, codes.Code) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err := c.ShouldRateLimit(ctx, req)
	return time.Since(start), status.Code(err)
}

func dialMany(addr string, n int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, 0, n)
	for range n {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			for _, c := range conns {
				_ = c.Close()
			}
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// sampleRSS reads pid's resident memory every 20 ms until stop, which
// returns the peak seen; peak reads it so far.
func sampleRSS(pid int) (peak func() uint64, stop func() uint64) {
	var highest atomic.Uint64
	quit, finished := make(chan struct{}), make(chan struct{})
	read := func() {
		if v, err := procstat.RSS(pid); err == nil && v > highest.Load() {
			highest.Store(v)
		}
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return highest.Load, func() uint64 {
		close(quit)
		<-finished
		read()
		return highest.Load()
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func readAll(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// arrived reads from the target's metrics how many calls it had taken in:
// those in progress and those refused.
func (t *target) arrived() int {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + t.debug[0] + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	n := 0.0
	for _, name := range []string{"ratelimitd_requests_in_flight", "ratelimitd_requests_overloaded_total"} {
		v, err := metricSum(strings.NewReader(string(body)), name)
		if err != nil {
			return -1
		}
		n += v
	}
	return int(n)
}

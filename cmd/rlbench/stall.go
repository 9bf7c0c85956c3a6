package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

// stallResult is what one target did while its Redis slept.
type stallResult struct {
	baseRSS, peakRSS uint64
	// codes counts the callers' answers: OK stands for any answer (OK or
	// OVER_LIMIT), the rest for the error they got.
	codes map[codes.Code]int
	// probe is the first call sent once Redis woke: how long it took and
	// what it got; probeMax the slowest of the probes after it.
	probe, probeMax time.Duration
	probeCode       codes.Code
	// drained: from the wake until every caller had its answer;
	// launched: from the start of the sleep until the last caller called
	// (past the sleep, the box could not send them all in time).
	drained, launched time.Duration
	// arrived: the most callers the service had taken in (deciding or
	// refused) at once while Redis slept, from its metrics every 100 ms.
	arrived int
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

// runStall is the stall scenario: -concurrency callers, each with a
// -timeout deadline, call while Redis sleeps (DEBUG SLEEP -stall), spread
// over -connections connections as a fleet of Envoys would; the service's
// resident memory is sampled throughout, and as Redis wakes a probe on a
// connection of its own tells whether the service answers at once.
func runStall(o options) error {
	if o.ratelimitd == "" {
		return fmt.Errorf("-ratelimitd is required")
	}
	dir, err := os.MkdirTemp("", "rlbench-stall-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logFile, err := os.Create(filepath.Join(dir, "ratelimitd.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	redisProc, redisAddr, err := startRedis(o.redisServer, dir)
	if err != nil {
		return err
	}
	defer redisProc.stop()

	fmt.Printf("\nrlbench scenario %s: %s\n", o.scenario.name, o.scenario.about)
	fmt.Printf("%d callers on %d connections, %s deadlines, Redis asleep %s, %d rounds, key %q, %d CPUs\n",
		o.concurrency, o.connections, o.timeout, o.stall, o.rounds, o.key, numCPU())
	fmt.Printf("%-36s %7s %8s %8s %8s %9s %7s %8s %9s %22s %9s %8s\n", "target", "RSS MiB", "peak MiB", "arrived",
		"answered", "RESOURCE_", "UNAVAIL", "DEADLINE", "launched", "probe", "probe max", "drained")
	for round := range o.rounds {
		for _, name := range o.targets {
			r, err := stallOnce(o, name, logFile, redisAddr, round)
			if err != nil {
				return fmt.Errorf("%s: %w (log: %s)", name, err, tail(readAll(logFile.Name()), 2000))
			}
			fmt.Printf("%-36s %7.1f %8.1f %8d %8d %9d %7d %8d %9s %22s %9s %8s\n", name, mib(r.baseRSS), mib(r.peakRSS), r.arrived,
				r.codes[codes.OK], r.codes[codes.ResourceExhausted], r.codes[codes.Unavailable], r.codes[codes.DeadlineExceeded],
				rnd(r.launched), fmt.Sprintf("%s %s", rnd(r.probe), r.probeCode), rnd(r.probeMax), rnd(r.drained))
			if other := o.concurrency - r.codes[codes.OK] - r.codes[codes.ResourceExhausted] - r.codes[codes.Unavailable] - r.codes[codes.DeadlineExceeded]; other > 0 {
				fmt.Printf("  %d callers got other codes: %v\n", other, r.codes)
			}
		}
	}
	fmt.Println("RSS: the service's resident memory before the stall and its peak (sampled every 20 ms); arrived: the most callers")
	fmt.Println("the service had taken in (deciding or refused) while Redis slept; answered: OK or OVER_LIMIT;")
	fmt.Println("probe: the first call sent as Redis woke, on its own connection; drained: until the last caller had its answer;")
	fmt.Println("launched: when the last caller called, from the start of the sleep (past the sleep, the box could not send them all in time).")
	return nil
}

func stallOnce(o options, name string, logFile io.Writer, redisAddr string, round int) (stallResult, error) {
	one := o
	one.replicas = 1
	t, err := startTarget(one, name, logFile, redisAddr)
	if err != nil {
		return stallResult{}, err
	}
	defer t.close()
	addr := t.conns[0].CanonicalTarget()
	conns, err := dialMany(addr, o.connections+1)
	if err != nil {
		return stallResult{}, err
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	probeClient := rlsv3.NewRateLimitServiceClient(conns[o.connections])
	// Warm up every connection (and the service's Redis pool and scripts).
	for i, c := range conns {
		if code := call(rlsv3.NewRateLimitServiceClient(c), stallRequest(o, round, -1-i), time.Minute); code != codes.OK {
			return stallResult{}, fmt.Errorf("warm-up call: %s", code)
		}
	}
	r := stallResult{codes: map[codes.Code]int{}}
	pid := t.procs[0].pid()
	if r.baseRSS, err = procstat.RSS(pid); err != nil {
		return r, err
	}
	peak, stopSampling := sampleRSS(pid)

	sleeper, err := dialRedis(redisAddr)
	if err != nil {
		return r, err
	}
	defer sleeper.close()
	woke := make(chan error, 1)
	sleepRedis := func() {
		_ = sleeper.c.SetDeadline(time.Now().Add(o.stall + time.Minute))
		_, err := sleeper.c.Write([]byte("DEBUG SLEEP " + strconv.FormatFloat(o.stall.Seconds(), 'f', 3, 64) + "\r\n"))
		if err == nil {
			_, err = sleeper.r.ReadString('\n')
		}
		woke <- err
	}

	// The callers are ready before Redis sleeps and start together, so
	// that as many as the box can send are in flight during the sleep.
	var mu sync.Mutex
	var wg, ready sync.WaitGroup
	var lastStart atomic.Int64
	begin := make(chan struct{})
	for i := range o.concurrency {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			client, req := rlsv3.NewRateLimitServiceClient(conns[i%o.connections]), stallRequest(o, round, i)
			ready.Done()
			<-begin
			lastStart.Store(time.Now().UnixNano())
			code := call(client, req, o.timeout)
			mu.Lock()
			r.codes[code]++
			mu.Unlock()
		}()
	}
	ready.Wait()
	// How many calls the service has taken in, polled until Redis wakes.
	var arrived atomic.Int64
	stopPolling := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stopPolling:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if n := int64(t.arrived()); n > arrived.Load() {
				arrived.Store(n)
			}
		}
	}()
	go sleepRedis()
	time.Sleep(50 * time.Millisecond) // the command reached the idle Redis
	asleep := time.Now()
	close(begin)
	if err := <-woke; err != nil {
		return r, fmt.Errorf("DEBUG SLEEP: %w", err)
	}
	wake := time.Now()
	close(stopPolling)
	r.launched = time.Unix(0, lastStart.Load()).Sub(asleep)
	r.probe, r.probeCode = timedCall(probeClient, stallRequest(o, round, o.concurrency), o.timeout)
	for i := range 20 {
		d, _ := timedCall(probeClient, stallRequest(o, round, o.concurrency+1+i), o.timeout)
		r.probeMax = max(r.probeMax, d)
	}
	wg.Wait()
	r.drained = time.Since(wake)
	<-polled
	r.arrived = int(arrived.Load())
	r.peakRSS = max(stopSampling(), peak(), r.baseRSS)
	return r, nil
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

package main

import (
	"fmt"
	"io"
	"os"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"

	"github.com/ratelimitd/ratelimitd/internal/procstat"
)

// stallResult is what one target did while its Redis slept.
type stallResult struct {
	baseRSS, peakRSS uint64
	// codes counts the callers' answers: OK stands for any answer (OK or
	// OVER_LIMIT), the rest for the error they got.
	codes map[codes.Code]int
	// probe is how long after the wake a call sent then was first answered
	// (calls one after the other, on a connection of their own; refused:
	// those refused before it) and with what; probeMax the slowest of 20
	// calls after it.
	probe, probeMax time.Duration
	probeCode       codes.Code
	probeRefused    int
	// drained: from the wake until every caller had its answer;
	// launched: from the start of the sleep until the last caller called
	// (past the sleep, the box could not send them all in time).
	drained, launched time.Duration
	// cpu: the service's CPU time from the sleep until the last answer.
	cpu time.Duration
	// arrived: the most callers the service had taken in (deciding or
	// refused) at once while Redis slept, from its metrics every 100 ms.
	arrived int
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
	dir, logFile, cleanup, err := workDir("rlbench-stall-")
	if err != nil {
		return err
	}
	defer cleanup()
	// The delay queue's metrics read Redis at every scrape, which would
	// wait out the sleep: the run polls the service's metrics meanwhile.
	if err := os.Setenv("QUEUE_ENABLED", "false"); err != nil {
		return err
	}
	// DEBUG is refused unless enabled (Redis 7).
	redisProc, redisAddr, err := startRedis(o.redisServer, dir, "--enable-debug-command", "local")
	if err != nil {
		return err
	}
	defer redisProc.stop()

	fmt.Printf("\nrlbench scenario %s: %s\n", o.scenario.name, o.scenario.about)
	fmt.Printf("%d callers on %d connections, %s deadlines, Redis asleep %s, %d rounds, key %q, %d CPUs\n",
		o.concurrency, o.connections, o.timeout, o.stall, o.rounds, o.key, numCPU())
	fmt.Printf("%-36s %7s %8s %8s %8s %9s %7s %8s %9s %22s %9s %8s %7s\n", "target", "RSS MiB", "peak MiB", "arrived",
		"answered", "RESOURCE_", "UNAVAIL", "DEADLINE", "launched", "probe", "probe max", "drained", "CPU")
	for round := range o.rounds {
		for _, name := range o.targets {
			r, err := stallOnce(o, name, logFile, redisAddr, round)
			if err != nil {
				return fmt.Errorf("%s: %w (log: %s)", name, err, tail(readAll(logFile.Name()), 2000))
			}
			fmt.Printf("%-36s %7.1f %8.1f %8d %8d %9d %7d %8d %9s %22s %9s %8s %7s\n", name, mib(r.baseRSS), mib(r.peakRSS), r.arrived,
				r.codes[codes.OK], r.codes[codes.ResourceExhausted], r.codes[codes.Unavailable], r.codes[codes.DeadlineExceeded],
				rnd(r.launched), fmt.Sprintf("%s %s (%d)", rnd(r.probe), r.probeCode, r.probeRefused), rnd(r.probeMax), rnd(r.drained), rnd(r.cpu))
			if other := o.concurrency - r.codes[codes.OK] - r.codes[codes.ResourceExhausted] - r.codes[codes.Unavailable] - r.codes[codes.DeadlineExceeded]; other > 0 {
				fmt.Printf("  %d callers got other codes: %v\n", other, r.codes)
			}
		}
	}
	fmt.Println("RSS: the service's resident memory before the stall and its peak (sampled every 20 ms); arrived: the most callers")
	fmt.Println("the service had taken in (deciding or refused) while Redis slept; answered: OK or OVER_LIMIT;")
	fmt.Println("probe: from the wake until a call sent then was answered (calls one after the other on a connection of their own;")
	fmt.Println("in brackets those refused before it); probe max: the slowest of 20 calls after it; drained: until the last caller's answer;")
	fmt.Println("launched: when the last caller called, from the start of the sleep (past the sleep, the box could not send them all in time);")
	fmt.Println("CPU: the service's, from the sleep to the last answer.")
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
	conns, err := dialMany(t.conns[0].CanonicalTarget(), o.connections+1)
	if err != nil {
		return stallResult{}, err
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	// Warm up every connection (and the service's Redis pool and scripts).
	for i, c := range conns {
		if code := call(rlsv3.NewRateLimitServiceClient(c), stallRequest(o, round, -1-i), time.Minute); code != codes.OK {
			return stallResult{}, fmt.Errorf("warm-up call: %s", code)
		}
	}
	r := stallResult{}
	pid := t.procs[0].pid()
	if r.baseRSS, err = procstat.RSS(pid); err != nil {
		return r, err
	}
	peak, stopSampling := sampleRSS(pid)
	cpuBefore, err := procstat.CPUTime(pid)
	if err != nil {
		return r, err
	}
	sleeper, err := dialRedis(redisAddr)
	if err != nil {
		return r, err
	}
	defer sleeper.close()

	c := readyCallers(o, conns[:o.connections], round)
	stopPolling := pollArrivals(t)
	woke := make(chan error, 1)
	go func() { woke <- sleeper.sleep(o.stall) }()
	time.Sleep(50 * time.Millisecond) // the command reached the idle Redis
	asleep := time.Now()
	close(c.begin)
	if err := <-woke; err != nil {
		return r, fmt.Errorf("DEBUG SLEEP: %w", err)
	}
	wake := time.Now()
	r.arrived = stopPolling()
	r.launched = time.Unix(0, c.lastStart.Load()).Sub(asleep)
	probe := rlsv3.NewRateLimitServiceClient(conns[o.connections])
	// Calls one after the other until one is answered: the wait for it,
	// from the wake, and how many were refused on the way; then 20 more.
	for i := 0; ; i++ {
		_, code := timedCall(probe, stallRequest(o, round, o.concurrency+i), o.timeout)
		if code == codes.OK || time.Since(wake) > o.timeout {
			r.probe, r.probeCode = time.Since(wake), code
			break
		}
		r.probeRefused++
	}
	for i := range 20 {
		d, _ := timedCall(probe, stallRequest(o, round, -100-i), o.timeout)
		r.probeMax = max(r.probeMax, d)
	}
	r.codes = c.wait()
	r.drained = time.Since(wake)
	if cpu, err := procstat.CPUTime(pid); err == nil {
		r.cpu = cpu - cpuBefore
	}
	r.peakRSS = max(stopSampling(), peak(), r.baseRSS)
	return r, nil
}

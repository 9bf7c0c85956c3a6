package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratelimitd/ratelimitd/internal/procstat"
	"github.com/ratelimitd/ratelimitd/internal/redisinfo"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// target is one server under load: one process, or -replicas processes
// that the load is spread over (the service's replicas sharing one Redis).
type target struct {
	name  string
	procs []*child
	redis bool // decisions go to the bench's redis-server
	conns []*grpc.ClientConn
	// debug holds each ratelimitd replica's debug address (metrics).
	debug []string
}

// leases reports whether the target runs with LEASE_ENABLED=true.
func (t *target) leases() bool {
	kind, extra, _ := strings.Cut(t.name, "+")
	return strings.HasSuffix(kind, "redis-lease") || strings.Contains("+"+extra+"+", "+LEASE_ENABLED=true+")
}

// leaseSetting is a LEASE_* duration the target's replicas run with: its
// "+NAME=VALUE", else rlbench's environment (which the replicas inherit),
// else def (the service's default).
func (t *target) leaseSetting(name string, def time.Duration) time.Duration {
	_, extra, _ := strings.Cut(t.name, "+")
	v, ok := "", false
	for kv := range strings.SplitSeq(extra, "+") {
		if val, found := strings.CutPrefix(kv, name+"="); found {
			v, ok = val, true
		}
	}
	if !ok {
		v, ok = os.LookupEnv(name)
	}
	if d, err := time.ParseDuration(v); ok && err == nil && d > 0 {
		return d
	}
	return def
}

// warmup is the unmeasured load before a run of t. A leasing target gets
// at least two LEASE_TARGETs of it: between its runs the other targets
// run, its replicas' rate estimates (over the last LEASE_TARGET) fall to
// zero and their leases end, so the first LEASE_TARGET of load rebuilds
// the estimates (blocks grow from 2 hits) and the second sizes blocks from
// a full one, as they are in steady traffic. It lasts three LEASE_IDLEs at
// least, too: a counter too cold for the estimate leases once a replica
// has seen it twice (lease.Store.blockSize), and a counter each replica
// sees every 10 s or so, as most of the Zipf sample's are, has been seen
// twice by all of them by then (at 18,000 decisions/s, all but 0.3%;
// after one LEASE_IDLE, a quarter are not): the run measures steady
// traffic, not the replicas' first sight of their counters, which a fleet
// pays once.
func (t *target) warmup(o options) time.Duration {
	if !t.leases() {
		return o.warmup
	}
	return max(o.warmup, 2*t.leaseSetting("LEASE_TARGET", lease.DefaultTarget), 3*t.leaseSetting("LEASE_IDLE", lease.DefaultIdle))
}

// drain is how long a run of t waits after its load before its CPU is
// read: for a leasing target, -lease-drain, or by default LEASE_IDLE and
// a second, so that the returns of the leases its load left (swept once
// idle) count in its own run, not the next target's.
func (t *target) drain(o options) time.Duration {
	if !t.leases() {
		return 0
	}
	if o.leaseDrain > 0 {
		return o.leaseDrain
	}
	return t.leaseSetting("LEASE_IDLE", lease.DefaultIdle) + time.Second
}

// cpu is the CPU the target's processes have used so far.
func (t *target) cpu() (time.Duration, error) {
	var sum time.Duration
	for _, p := range t.procs {
		c, err := procstat.CPUTime(p.pid())
		if err != nil {
			return 0, err
		}
		sum += c
	}
	return sum, nil
}

// sample is one measured run of one target.
type sample struct {
	loadResult
	serverCPU, redisCPU time.Duration
	// redisCPULoad is Redis's CPU up to the end of the load, without the
	// returns a leasing target's drain sees (redisCPU with them).
	redisCPULoad time.Duration
	commands     int64
	script       redisinfo.CommandStat
	lease        leaseStats // what the replicas' leases did over the run
}

func run(o options) error {
	if o.ratelimitd == "" {
		return errors.New("-ratelimitd is required")
	}
	if o.rounds < 1 || o.concurrency < 1 || o.duration <= 0 || o.replicas < 1 {
		return errors.New("-rounds, -concurrency, -duration and -replicas must be positive")
	}
	dir, logFile, cleanup, err := workDir("rlbench-")
	if err != nil {
		return err
	}
	defer cleanup()
	o.workDir = dir

	redisProc, redisAddr, err := startRedis(o.redisServer, dir)
	if err != nil {
		return err
	}
	defer redisProc.stop()
	info, err := dialRedis(redisAddr)
	if err != nil {
		return err
	}
	defer info.close()
	var targets []*target
	defer func() {
		for _, t := range targets {
			t.close()
		}
	}()
	for _, name := range o.targets {
		t, err := startTarget(o, name, logFile, redisAddr)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}

	fmt.Printf("\nrlbench scenario %s: %s\n", o.scenario.name, o.scenario.about)
	fmt.Printf("%d concurrent calls on %d connection(s), one per replica, %s per run after %s warm-up, %d rounds, key %q, GOMAXPROCS of this box: %d CPUs\n",
		o.concurrency, o.replicas, o.duration, o.warmup, o.rounds, o.key, numCPU())
	for _, t := range targets {
		if t.leases() {
			fmt.Printf("%s: %s warm-up, %s drain after its load (2 x LEASE_TARGET or 3 x LEASE_IDLE; LEASE_IDLE + 1s)\n", t.name, t.warmup(o), t.drain(o))
		}
	}
	if o.rate > 0 {
		fmt.Printf("every target is offered %.0f decisions/s (open loop), so CPU per decision compares the same load\n", o.rate)
	}
	fmt.Println("CPU per decision counts only the measured process (robust to a busy machine); decisions/s and latency are not.")
	samples, err := measureRounds(o, targets, info, redisProc)
	if err != nil {
		return err
	}
	printTable(o, targets, samples)
	reportFailures(samples, logFile.Name())
	return nil
}

// startTarget starts -replicas servers of what a target name describes:
// "floor", "memory", "redis", "redis-nopipe", "redis-lease",
// "envoy-model", each optionally "base-" (the -ratelimitd-base binary) and
// "+VAR=VALUE" (a setting).
func startTarget(o options, name string, logFile io.Writer, redisAddr string) (*target, error) {
	t := &target{name: name}
	for range o.replicas {
		proc, addrs, err := startReplica(o, t, name, logFile, redisAddr)
		if err != nil {
			t.close()
			return nil, err
		}
		addr := addrs.GRPC
		t.procs = append(t.procs, proc)
		if addrs.Debug != "" {
			t.debug = append(t.debug, addrs.Debug)
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.close()
			return nil, err
		}
		t.conns = append(t.conns, conn)
	}
	return t, nil
}

func startReplica(o options, t *target, name string, logFile io.Writer, redisAddr string) (*child, serviceAddrs, error) {
	// "redis+REDIS_PIPELINE_WINDOW=500us" is redis with that setting.
	kind, extra, _ := strings.Cut(name, "+")
	env := strings.Split(extra, "+")
	if extra == "" {
		env = nil
	}
	bin := o.ratelimitd
	if k, ok := strings.CutPrefix(kind, "base-"); ok {
		if o.base == "" {
			return nil, serviceAddrs{}, fmt.Errorf("target %q needs -ratelimitd-base", name)
		}
		kind, bin = k, o.base
	}
	switch kind {
	case "redis-nopipe":
		kind, env = "redis", append([]string{"REDIS_PIPELINE_WINDOW=0"}, env...)
	case "redis-lease":
		kind, env = "redis", append([]string{"LEASE_ENABLED=true"}, env...)
	}
	switch kind {
	case "floor":
		c, addr, err := startFloor()
		return c, serviceAddrs{GRPC: addr}, err
	case "envoy-model":
		t.redis = true
		c, addr, err := startModel(redisAddr, o.modelUnit, o.modelLimit)
		return c, serviceAddrs{GRPC: addr}, err
	case "envoyproxy":
		if o.envoyproxy == "" {
			return nil, serviceAddrs{}, fmt.Errorf("target %q needs -envoyproxy", name)
		}
		t.redis = true
		c, addr, err := startEnvoyproxy(o.envoyproxy, o.workDir, o, redisAddr, logFile)
		return c, serviceAddrs{GRPC: addr}, err
	case "memory":
		return startService(bin, o.config, logFile, append(env, "BACKEND_TYPE=memory")...)
	case "redis":
		t.redis = true
		return startService(bin, o.config, logFile, append(env, "BACKEND_TYPE=redis", "REDIS_URL="+redisAddr)...)
	}
	return nil, serviceAddrs{}, fmt.Errorf("unknown target %q", name)
}

func (t *target) close() {
	for _, c := range t.conns {
		_ = c.Close()
	}
	for _, p := range t.procs {
		p.stop()
	}
}

// measureRounds runs every target at every descriptor count, interleaved,
// round after round, printing each run as it ends.
func measureRounds(o options, targets []*target, info *redisConn, redisProc *child) (map[string][]sample, error) {
	samples := map[string][]sample{} // target/descriptors -> rounds
	for round := 1; round <= o.rounds; round++ {
		for _, d := range o.descriptors {
			reqs := o.scenario.requests(o.domain, o.key, d)
			for _, t := range targets {
				s, err := measure(o, t, info, redisProc, reqs)
				if err != nil {
					return nil, fmt.Errorf("%s, %d descriptors: %w", t.name, d, err)
				}
				k := rowKey(t.name, d)
				samples[k] = append(samples[k], s)
				fmt.Printf("  round %d %-14s %d desc: %8.0f/s p50 %-9s p99 %-9s server %6.1f us/dec  redis %6.1f us/dec  %.2f cmds/dec  errors %d\n",
					round, t.name, d, float64(s.calls)/s.elapsed.Seconds(), rnd(s.p50), rnd(s.p99),
					perCall(s.serverCPU, s.calls), perCall(s.redisCPU, s.calls), float64(s.commands)/float64(max(1, s.calls)), s.failed)
				if got := float64(s.calls) / s.elapsed.Seconds(); o.rate > 0 && got < 0.95*o.rate {
					fmt.Printf("    below the offered %.0f/s: this run was as fast as the target answered\n", o.rate)
				}
				if t.leases() {
					n := float64(max(1, s.calls))
					fmt.Printf("    leases: %.1f%% of decisions answered locally, %.3f blocks (%.3f refilled ahead) and %.3f returned hits per decision; redis %.1f us/dec before the drain's returns\n",
						100*s.lease.local/n, s.lease.blocks/n, s.lease.refills/n, s.lease.returned/n, perCall(s.redisCPULoad, s.calls))
				}
			}
		}
	}
	return samples, nil
}

// reportFailures prints how many calls failed and, if any did, the end of
// ratelimitd's log.
func reportFailures(samples map[string][]sample, logPath string) {
	failed := 0
	for _, ss := range samples {
		for _, s := range ss {
			failed += s.failed
		}
	}
	if failed > 0 {
		b, _ := os.ReadFile(logPath)
		fmt.Printf("\n%d calls failed; ratelimitd logged:\n%s", failed, tail(b, 2000))
	}
}

func measure(o options, t *target, info *redisConn, redisProc *child, reqs []*rlsv3.RateLimitRequest) (sample, error) {
	if w := t.warmup(o); w > 0 {
		load(t.conns, reqs, o.concurrency, w, o.timeout, o.rate)
	}
	cpu0, err1 := t.cpu()
	rcpu0, err2 := procstat.CPUTime(redisProc.pid())
	stats0, err3 := commandStats(info)
	lease0, err4 := t.leaseStats()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return sample{}, err
	}
	res := load(t.conns, reqs, o.concurrency, o.duration, o.timeout, o.rate)
	var rcpuLoad time.Duration
	if d := t.drain(o); d > 0 {
		// A replica returns a lease's unused hits once it is idle
		// (LEASE_IDLE): those returns belong to this run, not the next
		// target's. Redis's CPU up to here is the run without them.
		rcpuLoad, err2 = procstat.CPUTime(redisProc.pid())
		if err2 != nil {
			return sample{}, err2
		}
		time.Sleep(d)
	}
	cpu1, err1 := t.cpu()
	rcpu1, err2 := procstat.CPUTime(redisProc.pid())
	stats1, err3 := commandStats(info)
	lease1, err4 := t.leaseStats()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return sample{}, err
	}
	s := sample{loadResult: res, serverCPU: cpu1 - cpu0, lease: lease1.sub(lease0)}
	s.commands, s.script = statDelta(stats0, stats1)
	if o.cmdStats {
		printCommandStats(stats0, stats1, res.calls)
	}
	if t.redis {
		s.redisCPU = rcpu1 - rcpu0
		s.redisCPULoad = s.redisCPU
		if rcpuLoad > 0 {
			s.redisCPULoad = rcpuLoad - rcpu0
		}
	}
	return s, nil
}

func rowKey(name string, d int) string { return fmt.Sprintf("%s/%d", name, d) }

func perCall(d time.Duration, calls int) float64 {
	if calls == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(calls)
}

func rnd(d time.Duration) time.Duration {
	if d > 10*time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

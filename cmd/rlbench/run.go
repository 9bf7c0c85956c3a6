package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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
	redis bool // decisions go to a redis-server
	// ownRedis is the redis-server only this target uses (nil: none, or one
	// the caller started), and info a connection to it for INFO.
	ownRedis *child
	info     *redisConn
	conns    []*grpc.ClientConn
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
// two LEASE_TARGETs (its rate estimates fell to zero while the others ran)
// and three LEASE_IDLEs (a counter leases once a replica saw it twice), so
// the run measures steady traffic, not the replicas' first sight of their
// counters, which a fleet pays once.
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

	var targets []*target
	defer func() {
		for _, t := range targets {
			t.close()
		}
	}()
	for _, name := range o.targets {
		t, err := startTarget(o, name, logFile, "")
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
	samples, err := measureRounds(o, targets)
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
// "+VAR=VALUE" (a setting). A target that needs Redis uses redisAddr, or
// when that is "" a redis-server of its own for every round: what one
// target leaves in Redis (envoyproxy/ratelimit's keys live up to
// EXPIRATION_JITTER_MAX_SECONDS, 300 s, past their window) must not weigh
// on another's runs.
func startTarget(o options, name string, logFile io.Writer, redisAddr string) (*target, error) {
	kind, _, _ := targetKind(name)
	t := &target{name: name, redis: usesRedis(kind)}
	if t.redis && redisAddr == "" {
		proc, addr, err := startRedis(o.redisServer, o.workDir)
		if err != nil {
			return nil, err
		}
		t.ownRedis, redisAddr = proc, addr
		if t.info, err = dialRedis(addr); err != nil {
			t.close()
			return nil, err
		}
	}
	for range o.replicas {
		proc, addrs, err := startReplica(o, name, logFile, redisAddr)
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

// targetKind reads a target name: its kind (floor, memory, redis,
// envoy-model or envoyproxy), whether it runs -ratelimitd-base, and the
// settings it adds ("redis+REDIS_PIPELINE_WINDOW=500us" is redis with that
// setting; redis-nopipe and redis-lease are redis with theirs).
func targetKind(name string) (kind string, base bool, env []string) {
	kind, extra, _ := strings.Cut(name, "+")
	if extra != "" {
		env = strings.Split(extra, "+")
	}
	kind, base = strings.CutPrefix(kind, "base-")
	switch kind {
	case "redis-nopipe":
		kind, env = "redis", append([]string{"REDIS_PIPELINE_WINDOW=0"}, env...)
	case "redis-lease":
		kind, env = "redis", append([]string{"LEASE_ENABLED=true"}, env...)
	}
	return kind, base, env
}

func usesRedis(kind string) bool {
	return kind == "redis" || kind == "envoy-model" || kind == "envoyproxy"
}

func startReplica(o options, name string, logFile io.Writer, redisAddr string) (*child, serviceAddrs, error) {
	kind, base, env := targetKind(name)
	bin := o.ratelimitd
	if base {
		if o.base == "" {
			return nil, serviceAddrs{}, fmt.Errorf("target %q needs -ratelimitd-base", name)
		}
		bin = o.base
	}
	switch kind {
	case "floor":
		c, addr, err := startFloor()
		return c, serviceAddrs{GRPC: addr}, err
	case "envoy-model":
		c, addr, err := startModel(redisAddr, o.modelUnit, o.modelLimit)
		return c, serviceAddrs{GRPC: addr}, err
	case "envoyproxy":
		if o.envoyproxy == "" {
			return nil, serviceAddrs{}, fmt.Errorf("target %q needs -envoyproxy", name)
		}
		c, addr, err := startEnvoyproxy(o.envoyproxy, o.workDir, o, redisAddr, logFile)
		return c, serviceAddrs{GRPC: addr}, err
	case "memory":
		return startService(bin, o.config, logFile, append(env, "BACKEND_TYPE=memory")...)
	case "redis":
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
	if t.info != nil {
		t.info.close()
	}
	t.ownRedis.stop()
}

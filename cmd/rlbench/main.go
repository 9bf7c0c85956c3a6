// Command rlbench measures what one rate-limit decision costs, in one run
// on one machine: it starts its own redis-server, ratelimitd on the
// embedded store and on that Redis, and a bare gRPC server that answers OK
// without work (the floor), then drives each in turn, interleaved (A B C A
// B C ...), with the same load over loopback. Per target and descriptor
// count it prints decisions/s, latency p50/p99, the server's CPU per
// decision (from /proc/PID/stat), Redis's CPU per decision, Redis commands
// and script calls per decision and the script's usec_per_call (INFO
// commandstats), and the service/floor CPU ratio; medians over the rounds.
//
// Next to ratelimitd it can measure a cost model of envoyproxy/ratelimit
// (target envoy-model: its Redis backend's pipelined INCRBY + EXPIRE per
// descriptor, see model.go), and it has scenarios (-scenario): today's
// uniform load (default), a Zipf(1.1) load over 10^5 counters from three
// replicas sharing one Redis (zipf), a single hot counter from three
// replicas (hot), and 20,000 callers while Redis sleeps (stall, for the
// service's memory and MAX_CONCURRENT_REQUESTS); see scenario.go.
//
// CPU per decision is robust to other work on the machine (it counts only
// the measured process's own CPU); decisions/s and latencies are not.
//
//	go build -o /tmp/ratelimitd ./cmd/ratelimitd && go run ./cmd/rlbench -ratelimitd /tmp/ratelimitd
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

type options struct {
	ratelimitd  string
	base        string
	envoyproxy  string // the envoyproxy/ratelimit binary (target envoyproxy)
	workDir     string // the run's directory (set by run)
	redisServer string
	config      string
	domain      string
	key         string
	descriptors []int
	concurrency int
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	timeout     time.Duration
	targets     []string
	replicas    int
	scenario    scenario
	leaseDrain  time.Duration
	modelUnit   time.Duration
	modelLimit  uint64
	serveFloor  string
	serveModel  string
	modelRedis  string
	cmdStats    bool
	rate        float64
	// stall and connections: the stall scenario's sleep and connections.
	stall       time.Duration
	connections int
}

func main() {
	var o options
	var descs, targets, scenarios string
	flag.StringVar(&o.ratelimitd, "ratelimitd", "", "ratelimitd binary to measure (required)")
	flag.StringVar(&o.base, "ratelimitd-base", "", "a second ratelimitd binary (say, before a change) for targets named base-memory, base-redis")
	flag.StringVar(&o.envoyproxy, "envoyproxy", "", "the envoyproxy/ratelimit binary for target envoyproxy (GOBIN=/tmp/ref go install github.com/envoyproxy/ratelimit/src/service_cmd@latest)")
	flag.StringVar(&o.redisServer, "redis-server", "redis-server", "redis-server binary")
	flag.StringVar(&o.config, "config", "bench/config", "ratelimitd config directory")
	flag.StringVar(&o.domain, "domain", "bench", "rate limit domain")
	flag.StringVar(&scenarios, "scenario", "default", "scenarios to run, in order: "+scenarioNames()+", or all; the flags below override a scenario's settings")
	flag.StringVar(&o.key, "key", "fixed_window", "descriptor key (one rule of the config)")
	flag.StringVar(&descs, "descriptors", "1,3", "descriptors per request, one run each")
	flag.IntVar(&o.replicas, "replicas", 1, "processes per target, the load spread over them (one connection each); CPU is their sum")
	flag.IntVar(&o.concurrency, "concurrency", 50, "calls in flight")
	flag.DurationVar(&o.duration, "duration", 4*time.Second, "measured time per run")
	flag.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "unmeasured load before each run (a target with leases: at least 2 x its LEASE_TARGET)")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds; each round runs every target once")
	flag.DurationVar(&o.leaseDrain, "lease-drain", 0, "after a run of a target with leases, wait this long (past LEASE_IDLE) before reading CPU, so the returns of its idle leases count in its run; 0: the target's LEASE_IDLE + 1s")
	flag.DurationVar(&o.modelUnit, "model-unit", time.Second, "envoy-model: the window of its one limit")
	flag.Uint64Var(&o.modelLimit, "model-limit", 1000, "envoy-model: requests per window of its one limit")
	flag.DurationVar(&o.timeout, "timeout", time.Second, "per-call deadline")
	flag.StringVar(&targets, "targets", "floor,memory,redis,envoy-model",
		"targets in run order: floor, memory, redis, redis-nopipe (REDIS_PIPELINE_WINDOW=0), redis-lease (LEASE_ENABLED=true), envoy-model, envoyproxy (the real binary, -envoyproxy), and base-<target> for -ratelimitd-base; +NAME=VALUE adds a setting, e.g. redis+REDIS_PIPELINE_LIMIT=8")
	flag.Float64Var(&o.rate, "rate", 0, "decisions/s offered to every target (an open-loop schedule, so that CPU per decision is compared at one load); 0: as fast as each target answers")
	flag.DurationVar(&o.stall, "stall", 8*time.Second, "stall scenario: how long Redis sleeps (DEBUG SLEEP)")
	flag.IntVar(&o.connections, "connections", 100, "stall scenario: connections the callers (-concurrency) are spread over")
	flag.BoolVar(&o.cmdStats, "commandstats", false, "after each run, print what Redis spent per command (INFO commandstats deltas per decision)")
	flag.StringVar(&o.serveFloor, "serve-floor", "", "internal: serve the floor on this address")
	flag.StringVar(&o.serveModel, "serve-model", "", "internal: serve envoy-model on this address")
	flag.StringVar(&o.modelRedis, "model-redis", "", "internal: envoy-model's Redis address")
	flag.Parse()
	if o.serveModel != "" {
		if err := serveModel(o.serveModel, o.modelRedis, o.modelUnit, o.modelLimit); err != nil {
			fmt.Fprintln(os.Stderr, "rlbench model:", err)
			os.Exit(1)
		}
		return
	}
	if o.serveFloor != "" {
		if err := serveFloor(o.serveFloor); err != nil {
			fmt.Fprintln(os.Stderr, "rlbench floor:", err)
			os.Exit(1)
		}
		return
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if scenarios == "all" {
		scenarios = scenarioNames()
	}
	for _, name := range strings.Split(scenarios, ",") {
		sc, ok := scenarioNamed(strings.TrimSpace(name))
		if !ok {
			fmt.Fprintf(os.Stderr, "rlbench: unknown scenario %q (have %s)\n", name, scenarioNames())
			os.Exit(2)
		}
		so := sc.apply(o, set)
		var err error
		if set["descriptors"] {
			so.descriptors, err = parseInts(descs)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rlbench: -descriptors:", err)
			os.Exit(2)
		}
		if set["targets"] {
			so.targets = strings.Split(targets, ",")
		}
		runner := run
		if so.scenario.run != nil {
			runner = so.scenario.run
		}
		if err := runner(so); err != nil {
			fmt.Fprintln(os.Stderr, "rlbench:", err)
			os.Exit(1)
		}
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

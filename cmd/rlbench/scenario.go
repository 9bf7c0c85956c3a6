package main

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// scenario is a workload and the targets it compares. Flags given on the
// command line override its settings (apply).
type scenario struct {
	name        string
	about       string
	key         string
	descriptors []int
	targets     []string
	replicas    int
	rounds      int
	warmup      time.Duration
	// duration is the measured time per run; 0 keeps -duration's default.
	duration time.Duration
	// modelUnit and modelLimit are envoy-model's limit: the bench config's
	// rule for key, which the model does not read.
	modelUnit  time.Duration
	modelLimit uint64
	// requests builds the requests the load cycles through.
	requests func(domain, key string, descriptors int) []*rlsv3.RateLimitRequest
	// run replaces the throughput run (stall.go); concurrency and timeout
	// are its callers and their deadline.
	run            func(options) error
	concurrency    int
	timeout, stall time.Duration
	connections    int
}

// The Zipf and hot-counter rules have limits per hour far above what the
// box can send (bench/config), so every decision is an admission and the
// comparison is about cost; leases (LEASE_ENABLED) lease them.
const hourLimit = 1_000_000_000

var scenarios = []scenario{
	{
		name:  "default",
		about: "uniform load over 10^5 counters (1 descriptor) or 3 x 10^5 (3 descriptors), fixed_window 1000/s, one replica per target",
		key:   "fixed_window", descriptors: []int{1, 3},
		targets:  []string{"floor", "memory", "redis", "envoy-model"},
		replicas: 1, rounds: 2, warmup: 300 * time.Millisecond,
		modelUnit: time.Second, modelLimit: 1000,
		requests: func(domain, key string, d int) []*rlsv3.RateLimitRequest {
			return requests(domain, key, d, 4096)
		},
	},
	{
		name:  "zipf",
		about: "Zipf(s=1.1) over 10^5 counters, fixed_window 10^9/hour, three replicas sharing one Redis, leases off (redis) and on (redis-lease)",
		key:   "zipf", descriptors: []int{1},
		targets: []string{"floor", "redis", "redis-lease", "envoy-model"},
		// A leasing target's run is max(2 x LEASE_TARGET, 3 x LEASE_IDLE)
		// of warm-up, 30 s of load and LEASE_IDLE + 1 s of drain (run.go).
		// 30 s is LEASE_MAX_AGE: every lease reaches its age once within
		// the run (renewed in place, trimmed or ended), as it does once per
		// LEASE_MAX_AGE in steady traffic. The drain ends every lease at
		// once, which steady traffic does not (a lease lives until it
		// idles out or its window ends): its returns make the figure an
		// upper bound, and the run also prints Redis CPU before them. The
		// scenario takes about 15 minutes.
		replicas: 3, rounds: 3, warmup: time.Second, duration: 30 * time.Second,
		modelUnit: time.Hour, modelLimit: hourLimit,
		requests: zipfRequests,
	},
	{
		name:  "hot",
		about: "one hot counter, fixed_window 10^9/hour, three replicas sharing one Redis, leases off (redis) and on (redis-lease)",
		key:   "hot", descriptors: []int{1},
		targets:  []string{"floor", "redis", "redis-lease", "envoy-model"},
		replicas: 3, rounds: 3, warmup: time.Second,
		modelUnit: time.Hour, modelLimit: hourLimit,
		requests: func(domain, key string, d int) []*rlsv3.RateLimitRequest {
			return []*rlsv3.RateLimitRequest{request(domain, key, d, func(int) string { return "hot" })}
		},
	},
	{
		name: "stall",
		about: "20,000 callers with 30 s deadlines on 100 connections while Redis sleeps 8 s (DEBUG SLEEP): the service's peak RSS, " +
			"and whether it answers at once when Redis wakes, without MAX_CONCURRENT_REQUESTS, with its default and with a tight one",
		key: "zipf", descriptors: []int{1},
		targets:  []string{"redis+MAX_CONCURRENT_REQUESTS=0", "redis", "redis+MAX_CONCURRENT_REQUESTS=" + strconv.Itoa(stallCap)},
		replicas: 1, rounds: 2,
		run:         runStall,
		concurrency: 20_000, timeout: 30 * time.Second, stall: 8 * time.Second, connections: 100,
	},
}

// stallCap is the stall scenario's tight MAX_CONCURRENT_REQUESTS (the
// default is 10000).
const stallCap = 1000

func scenarioNamed(name string) (scenario, bool) {
	for _, s := range scenarios {
		if s.name == name {
			return s, true
		}
	}
	return scenario{}, false
}

func scenarioNames() string {
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
	}
	return strings.Join(names, ",")
}

// apply is o with the scenario's settings, except those set on the command
// line (-descriptors and -targets are the caller's, as they need parsing).
func (s scenario) apply(o options, set map[string]bool) options {
	o.scenario = s
	o.descriptors, o.targets = s.descriptors, s.targets
	if !set["key"] {
		o.key = s.key
	}
	if !set["replicas"] {
		o.replicas = s.replicas
	}
	if !set["rounds"] {
		o.rounds = s.rounds
	}
	if !set["warmup"] {
		o.warmup = s.warmup
	}
	if !set["duration"] && s.duration > 0 {
		o.duration = s.duration
	}
	if !set["model-unit"] {
		o.modelUnit = s.modelUnit
	}
	if !set["model-limit"] {
		o.modelLimit = s.modelLimit
	}
	if !set["concurrency"] && s.concurrency > 0 {
		o.concurrency = s.concurrency
	}
	if !set["timeout"] && s.timeout > 0 {
		o.timeout = s.timeout
	}
	if !set["stall"] && s.stall > 0 {
		o.stall = s.stall
	}
	if !set["connections"] && s.connections > 0 {
		o.connections = s.connections
	}
	return o
}

// request is one request of d descriptors, each one entry key=value(i).
func request(domain, key string, d int, value func(i int) string) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain}
	for i := range d {
		req.Descriptors = append(req.Descriptors, &rlcommon.RateLimitDescriptor{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: key, Value: value(i)}},
		})
	}
	return req
}

// zipfRequests draws 2^16 requests whose descriptors' values follow
// Zipf(s=1.1) over 10^5 counters (rank 0 the most frequent, about 13.5% of
// the draws; about 12,700 distinct counters in the sample), from a fixed
// seed so every run and target sees the same sequence. The load cycles
// through it, so each counter's arrivals are periodic at its Zipf rate.
func zipfRequests(domain, key string, d int) []*rlsv3.RateLimitRequest {
	z := rand.NewZipf(rand.New(rand.NewPCG(19, 3)), 1.1, 1, 100_000-1)
	out := make([]*rlsv3.RateLimitRequest, 1<<16)
	for i := range out {
		out[i] = request(domain, key, d, func(int) string { return "z" + strconv.FormatUint(z.Uint64(), 10) })
	}
	return out
}

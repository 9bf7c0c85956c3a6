package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redisinfo"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{in: nil, want: 0},
		{in: []float64{3}, want: 3},
		{in: []float64{5, 1}, want: 3},
		{in: []float64{9, 1, 5}, want: 5},
		{in: []float64{4, 1, 3, 2}, want: 2.5},
	}
	for _, tc := range tests {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestStatDelta(t *testing.T) {
	before := map[string]redisinfo.CommandStat{"evalsha": {Calls: 10, Usec: 100}, "info": {Calls: 1}, "get": {Calls: 5}}
	after := map[string]redisinfo.CommandStat{
		"evalsha": {Calls: 30, Usec: 900}, "eval": {Calls: 1, Usec: 50}, "info": {Calls: 2},
		"get": {Calls: 5}, "hset": {Calls: 20}, "fcall": {Calls: 4, Usec: 40},
	}
	commands, script := statDelta(before, after)
	// evalsha 20 + eval 1 + hset 20 + fcall 4; INFO is the bench's own.
	if commands != 45 {
		t.Errorf("commands = %d, want 45", commands)
	}
	if script.Calls != 25 || script.Usec != 890 {
		t.Errorf("script = %+v, want 25 calls, 890 usec", script)
	}
}

func TestTargetLeases(t *testing.T) {
	for name, want := range map[string]bool{
		"redis": false, "redis-lease": true, "base-redis-lease": true, "redis+LEASE_ENABLED=true": true,
		"redis+LEASE_ENABLED=false": false, "redis-lease+LEASE_TARGET=5s": true, "redis+X=1+LEASE_ENABLED=true": true,
		"envoy-model": false,
	} {
		if got := (&target{name: name}).leases(); got != want {
			t.Errorf("%s: leases() = %t, want %t", name, got, want)
		}
	}
}

func TestMetricSum(t *testing.T) {
	text := `# HELP ratelimitd_lease_local_hits_total hits answered from leases
# TYPE ratelimitd_lease_local_hits_total counter
ratelimitd_lease_local_hits_total 12
ratelimitd_lease_local_hits_total{shard="b"} 3.5
ratelimitd_lease_local_hits_total_other 100
ratelimitd_lease_blocks_total 7
`
	got, err := metricSum(strings.NewReader(text), localHitsMetric)
	if err != nil || got != 15.5 {
		t.Errorf("metricSum = %v, %v; want 15.5", got, err)
	}
}

// TestScenarios: a scenario's settings apply unless the flag was given, and
// the Zipf load is skewed as Zipf(1.1) over 10^5 counters is.
func TestScenarios(t *testing.T) {
	zipf, ok := scenarioNamed("zipf")
	if !ok {
		t.Fatal("no zipf scenario")
	}
	o := options{key: "mine", rounds: 7, replicas: 1, warmup: time.Millisecond, duration: time.Second}
	got := zipf.apply(o, map[string]bool{"rounds": true})
	if got.key != "zipf" || got.rounds != 7 || got.replicas != 3 || got.warmup != time.Second || got.modelUnit != time.Hour || got.duration != 30*time.Second {
		t.Errorf("apply = key %q, rounds %d, replicas %d, warmup %s, model unit %s, duration %s", got.key, got.rounds, got.replicas, got.warmup, got.modelUnit, got.duration)
	}
	if got := zipf.apply(o, map[string]bool{"duration": true}); got.duration != time.Second {
		t.Errorf("apply with -duration = %s, want the flag's 1s", got.duration)
	}
	reqs := zipf.requests("bench", "zipf", 1)
	counts := map[string]int{}
	for _, r := range reqs {
		counts[r.Descriptors[0].Entries[0].Value]++
	}
	// Zipf(1.1) over 10^5: the top counter about 13% of draws (1/H with
	// H = sum k^-1.1 ≈ 7.4), and tens of thousands of counters drawn.
	if top := float64(counts["z0"]) / float64(len(reqs)); top < 0.10 || top > 0.17 {
		t.Errorf("top counter drawn %.3f of the time, want about 0.13", top)
	}
	if len(counts) < 10000 {
		t.Errorf("%d distinct counters in %d draws", len(counts), len(reqs))
	}
	if _, ok := scenarioNamed("nope"); ok {
		t.Error("scenarioNamed(nope) found one")
	}
}

// A leasing target warms up two of its LEASE_TARGETs or three of its
// LEASE_IDLEs and drains past its LEASE_IDLE; other targets keep -warmup
// and do not drain.
func TestLeaseWarmupDrain(t *testing.T) {
	t.Setenv("LEASE_TARGET", "")
	t.Setenv("LEASE_IDLE", "")
	o := options{warmup: time.Second}
	for _, tt := range []struct {
		name          string
		warmup, drain time.Duration
	}{
		{"redis", time.Second, 0},
		{"redis-lease", max(2*lease.DefaultTarget, 3*lease.DefaultIdle), lease.DefaultIdle + time.Second},
		{"redis-lease+LEASE_TARGET=10s+LEASE_IDLE=3s", 20 * time.Second, 4 * time.Second},
		{"redis-lease+LEASE_TARGET=100ms+LEASE_IDLE=300ms", time.Second, 1300 * time.Millisecond},
		{"redis-lease+LEASE_TARGET=2s+LEASE_IDLE=30s", 90 * time.Second, 31 * time.Second},
		{"redis-lease+LEASE_TARGET=junk", max(2*lease.DefaultTarget, 3*lease.DefaultIdle), lease.DefaultIdle + time.Second},
	} {
		tg := &target{name: tt.name}
		if w, d := tg.warmup(o), tg.drain(o); w != tt.warmup || d != tt.drain {
			t.Errorf("%s: warmup %s drain %s, want %s %s", tt.name, w, d, tt.warmup, tt.drain)
		}
	}
	t.Setenv("LEASE_TARGET", "3s")
	t.Setenv("LEASE_IDLE", "1s")
	if w := (&target{name: "redis-lease"}).warmup(o); w != 6*time.Second {
		t.Errorf("LEASE_TARGET=3s in the environment: warmup %s, want 6s", w)
	}
	if d := (&target{name: "redis-lease"}).drain(options{leaseDrain: time.Minute}); d != time.Minute {
		t.Errorf("-lease-drain 1m: drain %s", d)
	}
}

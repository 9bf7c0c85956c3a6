package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/procstat"
	"github.com/ratelimitd/ratelimitd/internal/redisinfo"
)

// measureRounds runs every target at every descriptor count, interleaved,
// round after round, printing each run as it ends.
func measureRounds(o options, targets []*target) (map[string][]sample, error) {
	samples := map[string][]sample{} // target/descriptors -> rounds
	for round := 1; round <= o.rounds; round++ {
		for _, d := range o.descriptors {
			reqs := o.scenario.requests(o.domain, o.key, d)
			for _, t := range targets {
				s, err := measure(o, t, reqs)
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

func measure(o options, t *target, reqs []*rlsv3.RateLimitRequest) (sample, error) {
	if w := t.warmup(o); w > 0 {
		load(t.conns, reqs, o.concurrency, w, o.timeout, o.rate)
	}
	cpu0, err1 := t.cpu()
	rcpu0, err2 := t.redisCPU()
	stats0, err3 := t.commandStats()
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
		rcpuLoad, err2 = t.redisCPU()
		if err2 != nil {
			return sample{}, err2
		}
		time.Sleep(d)
	}
	cpu1, err1 := t.cpu()
	rcpu1, err2 := t.redisCPU()
	stats1, err3 := t.commandStats()
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

// redisCPU is the CPU time of the target's own redis-server (0 if none).
func (t *target) redisCPU() (time.Duration, error) {
	if t.ownRedis == nil {
		return 0, nil
	}
	return procstat.CPUTime(t.ownRedis.pid())
}

// commandStats reads the target's own redis-server's INFO commandstats
// (none if it has none).
func (t *target) commandStats() (map[string]redisinfo.CommandStat, error) {
	if t.info == nil {
		return nil, nil
	}
	return commandStats(t.info)
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

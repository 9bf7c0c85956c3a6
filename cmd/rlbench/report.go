package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

func numCPU() int { return runtime.NumCPU() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// stat is "median (min-max)" of one column over the rounds.
func stat(samples []sample, f func(sample) float64, format string) (float64, string) {
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = f(s)
	}
	m := median(xs)
	if len(xs) < 2 {
		return m, fmt.Sprintf(format, m)
	}
	return m, fmt.Sprintf(format+" ("+format+"-"+format+")", m, slices.Min(xs), slices.Max(xs))
}

func printTable(o options, targets []*target, samples map[string][]sample) {
	fmt.Printf("\nmedians over %d rounds (min-max); CPU in us per decision\n", o.rounds)
	header := []string{"target", "desc", "decisions/s", "p50 ms", "p99 ms", "server CPU", "server/floor", "redis CPU", "cmds/dec", "scripts/dec", "script us/dec", "local %", "errors"}
	rows := [][]string{header}
	for _, d := range o.descriptors {
		floor := 0.0
		if fs, ok := samples[rowKey("floor", d)]; ok {
			floor, _ = stat(fs, func(s sample) float64 { return perCall(s.serverCPU, s.calls) }, "%.1f")
		}
		for _, t := range targets {
			ss := samples[rowKey(t.name, d)]
			_, rate := stat(ss, func(s sample) float64 { return float64(s.calls) / s.elapsed.Seconds() }, "%.0f")
			_, p50 := stat(ss, func(s sample) float64 { return ms(s.p50) }, "%.2f")
			_, p99 := stat(ss, func(s sample) float64 { return ms(s.p99) }, "%.2f")
			cpu, cpuS := stat(ss, func(s sample) float64 { return perCall(s.serverCPU, s.calls) }, "%.1f")
			ratio := "-"
			if floor > 0 && t.name != "floor" {
				ratio = fmt.Sprintf("%.2fx", cpu/floor)
			}
			redisCPU, cmds, scripts, script := "-", "-", "-", "-"
			if t.redis {
				_, redisCPU = stat(ss, func(s sample) float64 { return perCall(s.redisCPU, s.calls) }, "%.1f")
				_, cmds = stat(ss, func(s sample) float64 { return float64(s.commands) / float64(max(1, s.calls)) }, "%.2f")
				// Script calls per decision: at most 1 however many
				// descriptors and limits (fewer when pipelines merge takes).
				_, scripts = stat(ss, func(s sample) float64 { return float64(s.script.Calls) / float64(max(1, s.calls)) }, "%.2f")
				// Per decision, not per call: under load one call of the
				// takes function decides a whole pipeline's takes.
				_, script = stat(ss, func(s sample) float64 {
					return float64(s.script.Usec) / float64(max(1, s.calls))
				}, "%.2f")
			}
			local := "-"
			if t.leases() {
				// Decisions answered from a lease, without Redis.
				_, local = stat(ss, func(s sample) float64 { return 100 * s.lease.local / float64(max(1, s.calls)) }, "%.0f")
			}
			errs := 0
			for _, s := range ss {
				errs += s.failed
			}
			rows = append(rows, []string{t.name, fmt.Sprint(d), rate, p50, p99,
				cpuS, ratio, redisCPU, cmds, scripts, script, local, fmt.Sprint(errs)})
		}
	}
	widths := make([]int, len(header))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			fmt.Fprintf(&b, "%-*s  ", widths[i], c)
		}
		fmt.Println(strings.TrimRight(b.String(), " "))
	}
}

package main

import (
	"os"
	"testing"
	"time"
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
	before := map[string]cmdStat{"evalsha": {calls: 10, usec: 100}, "info": {calls: 1}, "get": {calls: 5}}
	after := map[string]cmdStat{
		"evalsha": {calls: 30, usec: 900}, "eval": {calls: 1, usec: 50}, "info": {calls: 2},
		"get": {calls: 5}, "hset": {calls: 20}, "fcall": {calls: 4, usec: 40},
	}
	commands, script := statDelta(before, after)
	// evalsha 20 + eval 1 + hset 20 + fcall 4; INFO is the bench's own.
	if commands != 45 {
		t.Errorf("commands = %d, want 45", commands)
	}
	if script.calls != 25 || script.usec != 890 {
		t.Errorf("script = %+v, want 25 calls, 890 usec", script)
	}
}

// TestCPUTime reads this process's own /proc/PID/stat while it burns CPU:
// the figure must grow (the wall-clock cap only guards a broken reader).
func TestCPUTime(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x, used := 0, time.Duration(0)
	for start := time.Now(); used < 30*time.Millisecond && time.Since(start) < 10*time.Second; {
		for range 1_000_000 {
			x++
		}
		now, err := cpuTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		used = now - before
	}
	if used < 30*time.Millisecond {
		t.Errorf("spinning for 10s read as %s of CPU (x=%d)", used, x)
	}
	if _, err := cpuTime(-1); err == nil {
		t.Error("cpuTime(-1) succeeded")
	}
}

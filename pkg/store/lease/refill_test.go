package lease_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// Steady traffic on a warm counter with a sweep every 100 ms: with refill
// ahead, blocks come from the sweeps and, once the rate estimate has
// settled (a target, 1 s), no request reaches the backend; without it,
// each block's end (about every second) sends a request there. Either
// way the backend counts exactly the hits admitted once leases are given
// back, and a bucket lease is never refilled ahead.
func TestRefillAhead(t *testing.T) {
	window := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1e9, Period: time.Hour}
	sliding := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 1e9, Period: time.Hour}
	gcra := algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 150, Period: time.Second}
	tests := []struct {
		name        string
		lim         algorithms.Limit
		ahead       bool
		wantPath    func(n int) bool // request-path backend calls after the first second
		wantRefills bool             // Spare ops sent by sweeps
	}{
		{"fixed_window, ahead", window, true, func(n int) bool { return n == 0 }, true},
		{"sliding_window, ahead", sliding, true, func(n int) bool { return n == 0 }, true},
		{"fixed_window, not ahead", window, false, func(n int) bool { return n >= 20 }, false},
		{"gcra is not refilled ahead", gcra, true, func(n int) bool { return n >= 5 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, lease.WithTarget(time.Second), lease.WithRefillAhead(tt.ahead))
			const gap = 10 * time.Millisecond
			admitted := r.warm("k", tt.lim, gap)
			sweepSpares := 0
			path := r.steady("k", tt.lim, gap, 3000, func() {
				before, _ := r.rec.spares()
				r.sweep()
				after, _ := r.rec.spares()
				sweepSpares += len(after) - len(before)
			})
			admitted += 3000
			if !tt.wantPath(path) {
				t.Errorf("%d requests reached the backend after warm-up", path)
			}
			if (sweepSpares > 0) != tt.wantRefills {
				t.Errorf("%d blocks taken by sweeps, want refills %v", sweepSpares, tt.wantRefills)
			}
			st := r.s.Stats()
			if tt.ahead && tt.lim.Algorithm != algorithms.GCRA && st.Outstanding > 3*100/2+1 {
				// A block is about rate*target = 100 hits; a lease holds
				// at most one and a half.
				t.Errorf("%d hits outstanding, want at most 151", st.Outstanding)
			}
			if tt.lim.Algorithm == algorithms.GCRA {
				return
			}
			if err := r.s.ReturnAll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := r.count("k", tt.lim); got != admitted {
				t.Errorf("backend counts %d hits, %d admitted", got, admitted)
			}
			t.Logf("%d request-path calls, %d sweep blocks, %+v", path, sweepSpares, st)
		})
	}
}

// A counter too cold for the rate estimate (a hit every 8 s against the
// 5 s target) but back well within LEASE_IDLE (20 s) leases blocks of 2
// from its second hit on, and sweeps refill them: after that a hit of it
// reaches the backend on the request path only after LEASE_MAX_AGE ended
// its lease (not renewed: unused for more than a LEASE_TARGET), and the
// backend still counts exactly the hits admitted once the lease is given
// back. With LEASE_IDLE below its gap each hit is a round trip, as before.
func TestColdCounterBackWithinIdle(t *testing.T) {
	tests := []struct {
		name         string
		idle         time.Duration
		maxAge       time.Duration
		wantPath     int  // request-path calls after the first two hits, of 28
		wantReturned bool // leases ended in use (max age) or idle gave their rest back
	}{
		{"back within LEASE_IDLE", 20 * time.Second, 0, 0, false},
		{"back within LEASE_IDLE, LEASE_MAX_AGE 30s", 20 * time.Second, 30 * time.Second, 28 * 8 / 30, true},
		{"LEASE_IDLE shorter than its gap", 7 * time.Second, 0, 28, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, lease.WithTarget(5*time.Second), lease.WithIdle(tt.idle), lease.WithMaxAge(tt.maxAge))
			lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1e9, Period: 24 * time.Hour}
			path := 0
			for i := 1; i <= 30; i++ {
				res, local := r.local(hit("k", lim, 1))
				if !res[0].Allowed {
					t.Fatalf("hit %d denied", i)
				}
				if !local && i > 2 {
					path++
				}
				for range 80 { // 8 s of sweeps
					r.clock.Advance(100 * time.Millisecond)
					r.sweep()
				}
			}
			if path != tt.wantPath {
				t.Errorf("%d hits reached the backend after the second, want %d", path, tt.wantPath)
			}
			st := r.s.Stats()
			if (st.Returned > 0) != tt.wantReturned {
				t.Errorf("%d hits returned, want some: %v", st.Returned, tt.wantReturned)
			}
			if st.Outstanding > 3 {
				t.Errorf("%d hits outstanding, want at most 3 (a block of 2 refilled at 1 left)", st.Outstanding)
			}
			if err := r.s.ReturnAll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := r.count("k", lim); got != 30 {
				t.Errorf("backend counts %d hits, 30 admitted", got)
			}
			t.Logf("%d request-path calls, %+v", path, st)
		})
	}
}

// A busy window lease that LEASE_MAX_AGE ends is renewed by the sweep
// that ends it: its rest goes back and a new block comes in the sweep's
// refill call, so no request goes to the backend for it; the backend still
// counts exactly the hits admitted. Without refill ahead, the request
// after each age end goes to the backend instead.
func TestMaxAgeRenewsBusyLease(t *testing.T) {
	for _, ahead := range []bool{true, false} {
		t.Run(fmt.Sprintf("refill ahead %v", ahead), func(t *testing.T) {
			r := newRig(t, lease.WithTarget(time.Second), lease.WithMaxAge(2*time.Second), lease.WithRefillAhead(ahead))
			lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1e9, Period: time.Hour}
			const gap = 10 * time.Millisecond
			admitted := r.warm("k", lim, gap)
			path := r.steady("k", lim, gap, 1000, r.sweep) // 10 s: five LEASE_MAX_AGEs
			admitted += 1000
			st := r.s.Stats()
			if ahead && (path != 0 || st.Returned == 0) {
				t.Errorf("%d requests reached the backend, %d hits returned; want 0 and the aged leases' rest", path, st.Returned)
			}
			if !ahead && path < 4 {
				t.Errorf("%d requests reached the backend, want one per LEASE_MAX_AGE", path)
			}
			if err := r.s.ReturnAll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := r.count("k", lim); got != admitted {
				t.Errorf("backend counts %d hits, %d admitted", got, admitted)
			}
			t.Logf("%d request-path calls, %+v", path, st)
		})
	}
}

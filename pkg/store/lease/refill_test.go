package lease_test

import (
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
// from its second hit on, and sweeps refill them: after that no hit of it
// reaches the backend on the request path (LEASE_MAX_AGE renews its lease
// in place), and the backend still counts exactly the hits admitted once
// the lease is given back. With LEASE_IDLE below its gap each hit is a
// round trip, as before.
func TestColdCounterBackWithinIdle(t *testing.T) {
	tests := []struct {
		name         string
		idle         time.Duration
		maxAge       time.Duration
		wantPath     int  // request-path calls after the first two hits, of 28
		wantReturned bool // leases ended in use (max age) or idle gave their rest back
	}{
		{"back within LEASE_IDLE", 20 * time.Second, 0, 0, false},
		{"back within LEASE_IDLE, LEASE_MAX_AGE 30s renews in place", 20 * time.Second, 30 * time.Second, 0, false},
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
				r.sweepFor(8 * time.Second)
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

// At LEASE_MAX_AGE the sweep renews a window lease in place when a block
// of its counter would be taken now: a busy lease costs the backend
// nothing (no return, no take, no request-path call), a lease whose rate
// fell gives back what it holds beyond one and a half of its new blocks,
// and a lease no block would be taken for ends and returns its rest. The
// backend counts exactly the hits admitted in every case.
func TestMaxAgeRenewsInPlace(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1e9, Period: time.Hour}
	tests := []struct {
		name      string
		slowGap   time.Duration // after 10 s of hits 10 ms apart; 0: none
		quiet     bool          // then no hits for 10 s
		wantTrim  bool          // some hits returned before ReturnAll
		wantLease bool          // still leased at the end
	}{
		{"busy", 0, false, false, true},
		{"rate fell", 400 * time.Millisecond, false, true, true},
		{"quiet", 0, true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// LEASE_IDLE off, so that only the age can end a lease.
			r := newRig(t, lease.WithTarget(time.Second), lease.WithMaxAge(2*time.Second), lease.WithIdle(0))
			admitted := busyFor10s(t, r, lim)
			if tt.slowGap > 0 {
				// A hit per slowGap sizes blocks of about 1s/slowGap = 3,
				// swept every 100 ms.
				n := int(5 * time.Second / tt.slowGap)
				for range n {
					r.sweepFor(tt.slowGap)
					if res := r.take(hit("k", lim, 1)); !res[0].Allowed {
						t.Fatal("denied")
					}
				}
				admitted += uint64(n)
			}
			if tt.quiet {
				r.sweepFor(10 * time.Second)
			}
			st := r.s.Stats()
			if _, hits := r.rec.returned(); (hits > 0) != tt.wantTrim {
				t.Errorf("%d hits returned, want some: %v", hits, tt.wantTrim)
			}
			if (st.Outstanding > 0) != tt.wantLease {
				t.Errorf("%d hits outstanding, want a lease: %v", st.Outstanding, tt.wantLease)
			}
			if tt.slowGap > 0 && st.Outstanding > 6 {
				t.Errorf("%d hits outstanding after the rate fell, want at most 6 (one and a half blocks of at most 4)", st.Outstanding)
			}
			if err := r.s.ReturnAll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := r.count("k", lim); got != admitted {
				t.Errorf("backend counts %d hits, %d admitted", got, admitted)
			}
			t.Logf("%+v", st)
		})
	}
}

// busyFor10s warms k and keeps it busy for 10 s (five LEASE_MAX_AGEs of
// TestMaxAgeRenewsInPlace), a hit every 10 ms: none reaches the backend
// and nothing is given back, as the lease is renewed in place. It returns
// the hits admitted.
func busyFor10s(t *testing.T, r *rig, lim algorithms.Limit) uint64 {
	t.Helper()
	const gap = 10 * time.Millisecond
	admitted := r.warm("k", lim, gap)
	path := r.steady("k", lim, gap, 1000, r.sweep)
	admitted += 1000
	if path != 0 {
		t.Errorf("%d requests reached the backend, want 0", path)
	}
	if calls, hits := r.rec.returned(); calls != 0 {
		t.Errorf("%d returns (%d hits) while the lease was busy, want none", calls, hits)
	}
	return admitted
}

// A counter whose lease served hits before LEASE_IDLE ended it takes a
// block of 2 again at its next hit, however long the gap: its next lease
// will most likely pay off too. One whose lease ended unused does not, so
// a counter seen once a minute stops leasing.
func TestLeaseAgainAfterPaidLease(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1e9, Period: time.Hour}
	tests := []struct {
		name      string
		gaps      []time.Duration // before each hit after the first
		wantBlock bool            // the last hit's backend call took a block
	}{
		{"lease served hits, then a gap past LEASE_IDLE", []time.Duration{8 * time.Second, 8 * time.Second, 8 * time.Second, 25 * time.Second}, true},
		{"lease unused, then a gap past LEASE_IDLE", []time.Duration{8 * time.Second, 25 * time.Second}, false},
		{"never leased, a gap past LEASE_IDLE", []time.Duration{25 * time.Second, 25 * time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, lease.WithTarget(5*time.Second), lease.WithIdle(20*time.Second))
			r.take(hit("k", lim, 1))
			local := false
			for _, gap := range tt.gaps {
				r.sweepFor(gap)
				_, local = r.local(hit("k", lim, 1))
			}
			if local {
				t.Fatal("the last hit was answered locally")
			}
			last := r.rec.last()
			if got := len(last.reqs) > 1; got != tt.wantBlock {
				t.Errorf("the last hit's call took a block: %v, want %v (%+v)", got, tt.wantBlock, last.reqs)
			}
			if err := r.s.ReturnAll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got, want := r.count("k", lim), uint64(len(tt.gaps)+1); got != want {
				t.Errorf("backend counts %d hits, %d admitted", got, want)
			}
		})
	}
}

// Tick visits every lease once a second and, in between, only the leases
// used since the last sweep: a busy lease is still refilled ahead at every
// tick (no request reaches the backend), a quiet one still ends by
// LEASE_IDLE and a second, and SweepUsed alone leaves an idle lease be.
func TestTick(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1e9, Period: time.Hour}
	r := newRig(t, lease.WithTarget(time.Second), lease.WithIdle(5*time.Second), lease.WithMaxAge(0))
	tick := func() {
		if err := r.s.Tick(r.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	const gap = 10 * time.Millisecond
	admitted := map[string]uint64{"quiet": r.warm("quiet", lim, gap)}
	quietHeld := r.s.Stats().Outstanding
	admitted["busy"] = r.warm("busy", lim, gap) + 1000
	if path := r.steady("busy", lim, gap, 1000, tick); path != 0 { // 10 s, a tick every 100 ms
		t.Errorf("%d requests of the busy counter reached the backend, want 0", path)
	}
	if got := r.s.Room("quiet"); got != 0 {
		t.Errorf("the quiet lease has room %d after 10 s of ticks, want it ended", got)
	}
	if calls, hits := r.rec.returned(); calls == 0 || hits < quietHeld {
		t.Errorf("%d returns of %d hits, want the quiet lease's %d", calls, hits, quietHeld)
	}

	admitted["idle"] = r.warm("idle", lim, gap)
	r.sweep()
	_, before := r.rec.returned()
	r.clock.Advance(5 * time.Second)
	if err := r.s.SweepUsed(r.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, hits := r.rec.returned(); hits != before {
		t.Error("SweepUsed ended a lease nobody used since the last sweep")
	}
	r.sweep()
	if _, hits := r.rec.returned(); hits == before || r.s.Room("idle") != 0 {
		t.Error("Sweep left an idle lease")
	}
	if err := r.s.ReturnAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	for key, n := range admitted {
		if got := r.count(key, lim); got != n {
			t.Errorf("backend counts %d hits of %s, %d admitted", got, key, n)
		}
	}
}

package rlqs_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
)

// fleetRules: one hot route, 600 requests per 10 s window.
const fleetRules = `
domain: edge
descriptors:
  - key: route
    value: hot
    rate_limit: {unit: second, unit_multiplier: 10, requests_per_unit: 600}
`

const (
	fleetLimit  = 600
	fleetWindow = 10 * time.Second
	tick        = 10 * time.Millisecond
)

var hot = map[string]string{"route": "hot"}

// denyAll is the recommended no-assignment and expired-assignment
// behavior: it makes the bound exact.
func denyAll() *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
}

func allowAll() *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_ALLOW_ALL}}
}

// fleet drives Envoys and replicas on one fake clock, counting what the
// Envoys admit per window of the rule, each and all.
type fleet struct {
	t        *testing.T
	clock    *rlqstest.Clock
	tick     time.Duration
	reps     []*replica
	envoys   []*rlqstest.Envoy
	epoch    time.Time // a window start
	window   time.Duration
	admitted map[int]int   // window index -> requests admitted by all Envoys
	fallback map[int]int   // of those, admitted by a no-assignment or expired behavior
	offered  map[int]int   // window index -> requests offered
	byEnvoy  map[int][]int // window index -> requests admitted, per Envoy
	carry    []float64
	// answered: each Envoy has had an assignment; offered and admitted
	// since all had.
	answered              []bool
	sinceOffered, sinceOK int
}

func newFleet(t *testing.T, clock *rlqstest.Clock, window time.Duration) *fleet {
	return &fleet{t: t, clock: clock, tick: tick, epoch: clock.Now(), window: window,
		admitted: map[int]int{}, fallback: map[int]int{}, offered: map[int]int{}, byEnvoy: map[int][]int{}}
}

func (f *fleet) windowOf(now time.Time) int { return int(now.Sub(f.epoch) / f.window) }

// run steps the clock for d, each Envoy offering rate requests a second of
// bucket id; each tick, after the exchange, calls at (if set).
func (f *fleet) run(d time.Duration, rate float64, id map[string]string, at func(now time.Time)) {
	for len(f.carry) < len(f.envoys) {
		f.carry = append(f.carry, 0)
		f.answered = append(f.answered, false)
	}
	for end := f.clock.Now().Add(d); f.clock.Now().Before(end); {
		step(f.t, f.clock, f.tick, f.reps, f.envoys)
		now := f.clock.Now()
		w := f.windowOf(now)
		if f.byEnvoy[w] == nil {
			f.byEnvoy[w] = make([]int, len(f.envoys))
		}
		all := !slices.Contains(f.answered, false)
		for i, e := range f.envoys {
			f.carry[i] += rate * f.tick.Seconds()
			for ; f.carry[i] >= 1; f.carry[i]-- {
				f.offered[w]++
				v := e.Request(id)
				f.answered[i] = f.answered[i] || v.Assigned
				if all {
					f.sinceOffered++
				}
				if !v.Allowed {
					continue
				}
				f.admitted[w]++
				f.byEnvoy[w][i]++
				if all {
					f.sinceOK++
				}
				if !v.Assigned {
					f.fallback[w]++
				}
			}
		}
		if at != nil {
			at(now)
		}
	}
}

// windows are the whole windows run, in order.
func (f *fleet) windows() []int {
	var out []int
	for w := 0; w < f.windowOf(f.clock.Now()); w++ {
		out = append(out, w)
	}
	return out
}

func (f *fleet) report() string {
	s := ""
	for _, w := range f.windows() {
		s += fmt.Sprintf(" w%d:%d%v(%d by fallback)/%d", w, f.admitted[w], f.byEnvoy[w], f.fallback[w], f.offered[w])
	}
	return s
}

// checkBound holds every whole window to the bound: what Envoys admitted
// by assignments at most limit (what they admitted by a fallback behavior
// is the documented excess).
func (f *fleet) checkBound(limit int) {
	f.t.Helper()
	if len(f.windows()) == 0 {
		f.t.Fatal("no whole window ran")
	}
	for _, w := range f.windows() {
		if byAssignment := f.admitted[w] - f.fallback[w]; byAssignment > limit {
			f.t.Errorf("window %d: %d admitted by assignments, limit %d", w, byAssignment, limit)
		}
	}
}

// checkWindows holds the whole windows from first on to admitting at
// least minShare of limit, less what lost[w] says a crash left charged in
// window w.
func (f *fleet) checkWindows(first, limit int, minShare float64, lost map[int]int) {
	f.t.Helper()
	for _, w := range f.windows()[first:] {
		if float64(f.admitted[w]) < minShare*float64(limit)-float64(lost[w]) {
			f.t.Errorf("window %d: %d admitted, under %.0f%% of %d less %d", w, f.admitted[w], 100*minShare, limit, lost[w])
		}
	}
}

// checkFair holds every Envoy, in every whole window from first on, to
// at least share of an equal split of limit.
func (f *fleet) checkFair(first, limit int, share float64) {
	f.t.Helper()
	fair := float64(limit) / float64(len(f.envoys))
	for _, w := range f.windows()[first:] {
		for i, n := range f.byEnvoy[w] {
			if float64(n) < share*fair {
				f.t.Errorf("window %d: Envoy %d admitted %d, under %.0f%% of its fair share %.0f", w, i, n, 100*share, fair)
			}
		}
	}
}

// passed is the share of the requests offered since every Envoy had its
// first assignment that were admitted.
func (f *fleet) passed() float64 {
	if f.sinceOffered == 0 {
		return 0
	}
	return float64(f.sinceOK) / float64(f.sinceOffered)
}

// TestFleetBound: three Envoys on two replicas. Whatever Envoy's fallback
// behaviors, the requests they admit by ratelimitd's assignments never
// exceed the limit in a window; what they admit by an ALLOW_ALL fallback
// comes on top (the documented bound: before a bucket's first
// assignment, and between a window's end and the next window's grant),
// and, past what the grants charged, recorded in the counter after the
// fact; with the recommended DENY_ALL behaviors nothing is.
func TestFleetBound(t *testing.T) {
	tests := []struct {
		name     string
		set      rlqstest.Settings
		load     float64 // of the limit
		fallback bool    // some requests are admitted by a fallback
		recorded int     // requests recorded after the fact: 0 none, 1 some, -1 either
	}{
		{"recommended: DENY_ALL without or after an assignment", rlqstest.Settings{NoAssignment: denyAll(), Expired: denyAll(), ExpiredFor: time.Hour}, 3, false, 0},
		{"recommended, below the limit", rlqstest.Settings{NoAssignment: denyAll(), Expired: denyAll(), ExpiredFor: time.Hour}, 0.9, false, 0},
		{"filter defaults: ALLOW_ALL without an assignment", rlqstest.Settings{}, 3, true, 1},
		{"filter defaults, below the limit", rlqstest.Settings{}, 0.9, true, 1},
		// What it admits between a window's end and the next grant is
		// within what the ended window's grants charged, or recorded.
		{"ALLOW_ALL for 2 s after an assignment expires", rlqstest.Settings{NoAssignment: denyAll(), Expired: allowAll(), ExpiredFor: 2 * time.Second}, 0.9, true, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := tt.set
			set.Domain = "edge"
			f, _ := newMemFleet(t, fleetRules, 2, 3, set)
			f.run(4*fleetWindow, tt.load*fleetLimit/fleetWindow.Seconds()/3, hot, nil)
			t.Logf("admitted [per Envoy] / offered per window:%s", f.report())
			f.checkBound(fleetLimit)
			fallback := 0
			for _, w := range f.windows() {
				fallback += f.fallback[w]
			}
			var recorded uint64
			for _, r := range f.reps {
				recorded += r.srv.Stats().Recorded
			}
			if (fallback > 0) != tt.fallback {
				t.Errorf("%d admitted by fallbacks, want some: %v", fallback, tt.fallback)
			}
			if tt.recorded >= 0 && (recorded > 0) != (tt.recorded > 0) {
				t.Errorf("%d recorded after the fact, want some: %v", recorded, tt.recorded > 0)
			}
		})
	}
}

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

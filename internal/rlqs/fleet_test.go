package rlqs_test

import (
	"fmt"
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
// Envoys admit per window of the rule.
type fleet struct {
	t        *testing.T
	clock    *rlqstest.Clock
	reps     []*replica
	envoys   []*rlqstest.Envoy
	epoch    time.Time // a window start
	window   time.Duration
	admitted map[int]int // window index -> requests admitted by all Envoys
	fallback map[int]int // of those, admitted by a no-assignment or expired behavior
	offered  map[int]int
	carry    []float64
}

func newFleet(t *testing.T, clock *rlqstest.Clock, window time.Duration) *fleet {
	return &fleet{t: t, clock: clock, epoch: clock.Now(), window: window, admitted: map[int]int{}, fallback: map[int]int{}, offered: map[int]int{}}
}

func (f *fleet) windowOf(now time.Time) int { return int(now.Sub(f.epoch) / f.window) }

// run steps the clock for d, each Envoy offering rate requests a second of
// bucket id; each tick, after the exchange, calls at (if set).
func (f *fleet) run(d time.Duration, rate float64, id map[string]string, at func(now time.Time)) {
	for len(f.carry) < len(f.envoys) {
		f.carry = append(f.carry, 0)
	}
	for end := f.clock.Now().Add(d); f.clock.Now().Before(end); {
		step(f.t, f.clock, tick, f.reps, f.envoys)
		now := f.clock.Now()
		w := f.windowOf(now)
		for i, e := range f.envoys {
			f.carry[i] += rate * tick.Seconds()
			for ; f.carry[i] >= 1; f.carry[i]-- {
				f.offered[w]++
				v := e.Request(id)
				if v.Allowed {
					f.admitted[w]++
				}
				if v.Allowed && !v.Assigned {
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
		s += fmt.Sprintf(" w%d:%d(%d by fallback)/%d", w, f.admitted[w], f.fallback[w], f.offered[w])
	}
	return s
}

// checkWindows holds every whole window to the bound: what Envoys admitted
// by assignments at most limit (what they admitted by a fallback behavior
// is the documented excess), and all they admitted at least minShare of
// it, less what lost[w] says a crash left charged in window w.
func (f *fleet) checkWindows(limit int, minShare float64, lost map[int]int) {
	f.t.Helper()
	if len(f.windows()) == 0 {
		f.t.Fatal("no whole window ran")
	}
	for _, w := range f.windows() {
		if byAssignment := f.admitted[w] - f.fallback[w]; byAssignment > limit {
			f.t.Errorf("window %d: %d admitted by assignments, limit %d", w, byAssignment, limit)
		}
		if float64(f.admitted[w]) < minShare*float64(limit)-float64(lost[w]) {
			f.t.Errorf("window %d: %d admitted, under %.0f%% of %d less %d", w, f.admitted[w], 100*minShare, limit, lost[w])
		}
	}
}

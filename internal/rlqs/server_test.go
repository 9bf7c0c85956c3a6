package rlqs_test

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// windowStart is a fake time at the start of a 10 s window (and a minute).
var windowStart = time.Unix(1_800_000_000, 0)

// TestFleetMemstore: three Envoys offered three times the limit, on two
// replicas sharing one embedded store, admit at most the limit in every
// window and at least 95% of it.
func TestFleetMemstore(t *testing.T) {
	clock := rlqstest.NewClock(windowStart)
	st := memstore.New(memstore.WithClock(clock.Now))
	r := newRules(t, fleetRules)
	f := newFleet(t, clock, fleetWindow)
	f.reps = []*replica{startReplica(t, r, st, clock), startReplica(t, r, st, clock)}
	for i := range 3 {
		f.envoys = append(f.envoys, newEnvoy(t, clock, rlqstest.Settings{
			Domain: "edge", Interval: time.Second, NoAssignment: denyAll(), Expired: denyAll(),
			Addrs: []string{f.reps[i%2].addr, f.reps[(i+1)%2].addr},
		}))
	}
	f.run(3*fleetWindow, 3*fleetLimit/fleetWindow.Seconds()/3*3/3*1, hot, nil)
	t.Logf("admitted/offered per window:%s", f.report())
	for _, w := range f.windows() {
		if f.admitted[w] > fleetLimit {
			t.Errorf("window %d admitted %d, limit %d", w, f.admitted[w], fleetLimit)
		}
		if f.admitted[w] < fleetLimit*95/100 {
			t.Errorf("window %d admitted %d, under 95%% of %d", w, f.admitted[w], fleetLimit)
		}
	}
	for i, rep := range f.reps {
		t.Logf("replica %d: %+v", i, rep.srv.Stats())
	}
}

func TestBelowLimitDebug(t *testing.T) {
	clock := rlqstest.NewClock(windowStart)
	st := memstore.New(memstore.WithClock(clock.Now))
	r := newRules(t, fleetRules)
	f := newFleet(t, clock, fleetWindow)
	f.reps = []*replica{startReplica(t, r, st, clock), startReplica(t, r, st, clock)}
	for i := range 3 {
		f.envoys = append(f.envoys, newEnvoy(t, clock, rlqstest.Settings{
			Domain: "edge", Interval: time.Second, NoAssignment: denyAll(), Expired: denyAll(),
			Addrs: []string{f.reps[i%2].addr, f.reps[(i+1)%2].addr},
		}))
	}
	f.run(5*fleetWindow, 10, hot, nil)
	t.Logf("admitted/offered per window:%s", f.report())
	for i, rep := range f.reps {
		t.Logf("replica %d: %+v", i, rep.srv.Stats())
	}
}

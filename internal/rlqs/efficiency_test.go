package rlqs_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// TestEfficiency measures what three Envoys on two replicas admit at
// loads around the limit, for the table in docs/rlqs.md:
//
//	RLQS_EFFICIENCY=1 go test -run TestEfficiency -v ./internal/rlqs/
//
// Its only assertion is the bound; the shares are what it measures.
func TestEfficiency(t *testing.T) {
	if os.Getenv("RLQS_EFFICIENCY") == "" {
		t.Skip("a measurement: set RLQS_EFFICIENCY=1")
	}
	for _, c := range []struct {
		win, rep time.Duration
		limit    int
	}{{10 * time.Second, time.Second, 600}, {time.Minute, 5 * time.Second, 6000}} {
		rules := fmt.Sprintf("domain: edge\ndescriptors:\n  - key: route\n    value: hot\n    rate_limit: {unit: second, unit_multiplier: %d, requests_per_unit: %d}\n", int(c.win.Seconds()), c.limit)
		for _, frac := range []float64{rlqs.DefaultFraction} {
			for _, load := range []float64{0.5, 0.9, 1.2, 3} {
				clock := rlqstest.NewClock(windowStart)
				st := memstore.New(memstore.WithClock(clock.Now))
				r := newRules(t, rules)
				f := newFleet(t, clock, c.win)
				for range 2 {
					f.reps = append(f.reps, startReplica(t, r, st, clock, rlqs.WithFraction(frac), rlqs.WithReportingInterval(c.rep)))
				}
				for i := range 3 {
					f.envoys = append(f.envoys, newEnvoy(t, clock, rlqstest.Settings{Domain: "edge", Interval: c.rep, NoAssignment: denyAll(), Expired: denyAll(), ExpiredFor: time.Hour,
						Addrs: []string{f.reps[i%2].addr, f.reps[(i+1)%2].addr}}))
				}
				f.run(4*c.win, load*float64(c.limit)/c.win.Seconds()/3, hot, nil)
				f.checkWindows(c.limit, 0, nil)
				adm, off := 0, 0
				for _, w := range f.windows()[1:] {
					adm += f.admitted[w]
					off += f.offered[w]
				}
				t.Logf("win %v rep %v frac %.2f load %.1f: admitted %.1f%% of limit, %.1f%% of offered", c.win, c.rep, frac, load, 100*float64(adm)/float64(3*c.limit), 100*float64(adm)/float64(off))
			}
		}
	}
}

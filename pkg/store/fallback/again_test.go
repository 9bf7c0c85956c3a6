package fallback_test

import (
	"context"
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
)

// A counter handed back to the backend that goes local again in the same
// window gets its new hits charged too: its next charge's marker is not
// one the last outage's charge took (which denied it, losing the hits,
// while they counted as reconciled). Likewise for a replica restarted
// under the same name. This is how TestConcurrentOutage lost admissions.
func TestLocalAgainInTheSameWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool // a new replica, same WithID, for each outage
	}{
		{"the same replica", false},
		{"a replica restarted under the same name", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, b, r := rig(t, fallback.WithID("a"))
			lim := perMinute(100)
			want := uint64(0)
			for outage := range 4 {
				if tc.restart && outage > 0 {
					r.Close()
					r = replica(t, b, nil, fallback.WithID("a"))
				}
				b.setDown(true)
				hits := outage + 1
				if got := admitted(t, r, hits, local("k", lim)); got != hits {
					t.Fatalf("outage %d: admitted %d of %d locally", outage, got, hits)
				}
				b.setDown(false)
				if left := r.Reconcile(context.Background()); left != 0 {
					t.Fatalf("outage %d: %d counters left after a pass", outage, left)
				}
				want += uint64(hits)
				if used := b.used(t, "k", lim); used != want {
					t.Fatalf("after outage %d the counter holds %d, want the %d admitted locally", outage, used, want)
				}
				if st := r.Stats(); !tc.restart && st.Reconciled != want {
					t.Errorf("after outage %d: stats %+v, want %d reconciled", outage, st, want)
				}
			}
		})
	}
}

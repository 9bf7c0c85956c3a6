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

// A counter that goes local again starts from what the backend said when
// it took the last outage's hits, not from an answer before them, which
// would admit them a second time.
func TestLocalAgainStartsFromTheCharges(t *testing.T) {
	_, b, r := rig(t)
	lim := perMinute(100)
	if got := admitted(t, r, 10, local("k", lim)); got != 10 {
		t.Fatalf("admitted %d of 10 with the backend up", got)
	}
	b.setDown(true)
	if got := admitted(t, r, 100, local("k", lim)); got != 90 {
		t.Fatalf("admitted %d locally, want the 90 left", got)
	}
	b.setDown(false)
	if left := r.Reconcile(context.Background()); left != 0 {
		t.Fatalf("%d counters left after a pass", left)
	}
	b.setDown(true)
	if got := admitted(t, r, 10, local("k", lim)); got != 0 {
		t.Errorf("the second outage admitted %d locally, want none: the backend holds the whole limit", got)
	}
}

// Answers kept out of the order the backend ran their calls in leave what
// a counter going local starts from no older than the calls still in
// flight: a call that ran first but is kept last does not replace a newer
// answer, and one sent first but run last is not lost behind an answer
// kept before it. Otherwise the calls between them are admitted again.
func TestAnswersKeptOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before bool // the slow call is held before it runs, not after
	}{
		{"run first, kept last", false},
		{"sent first, run last", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, b, r := rig(t)
			lim := perMinute(100)
			at, resume := b.pauseNext(tc.before)
			slow := make(chan int)
			go func() { slow <- admitted(t, r, 1, local("k", lim)) }()
			<-at
			if got := admitted(t, r, 20, local("k", lim)); got != 20 {
				t.Fatalf("admitted %d of 20 with the backend up", got)
			}
			resume()
			total := 20 + <-slow
			b.setDown(true)
			total += admitted(t, r, 100, local("k", lim))
			b.setDown(false)
			r.Reconcile(context.Background())
			if used := b.used(t, "k", lim); total != 100 || used != 100 {
				t.Errorf("admitted %d in all, the counter holds %d: want the limit, 100, each", total, used)
			}
		})
	}
}

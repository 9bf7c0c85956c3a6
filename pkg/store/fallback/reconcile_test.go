package fallback_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
)

// Once the backend answers, the hits admitted locally are charged to their
// counter, and the counter is decided by the backend again; until then
// every request for it is decided locally without asking the backend.
func TestReconcileChargesWhatWasAdmitted(t *testing.T) {
	clock := fakeclock.New(t0.Add(time.Second))
	b := newBackend(t, clock)
	var reconciled uint64
	r := replica(t, b, nil, fallback.WithReplicas(2), fallback.WithReconciled(func(key string, hits uint64) { reconciled += hits }))
	lim := perMinute(100)
	if got := admitted(t, r, 10, local("k", lim)); got != 10 {
		t.Fatalf("admitted %d of 10 with the backend up", got)
	}
	b.setDown(true)
	before := b.callCount()
	if got := admitted(t, r, 50, local("k", lim)); got != 45 {
		t.Fatalf("admitted %d locally, want half of the 90 left: 45", got)
	}
	if calls := b.callCount() - before; calls != 1 {
		t.Errorf("the backend was asked %d times while the counter was decided locally, want once (the failure)", calls)
	}
	if left := r.Reconcile(context.Background()); left != 1 {
		t.Fatalf("with the backend down, %d counters left after a pass, want 1", left)
	}
	b.setDown(false)
	if got := admitted(t, r, 3, local("k", lim)); got != 0 {
		t.Errorf("before the pass, a counter still decided locally admitted %d past its share", got)
	}
	if left := r.Reconcile(context.Background()); left != 0 {
		t.Fatalf("%d counters still local after a pass with the backend up", left)
	}
	if used := b.used(t, "k", lim); used != 55 {
		t.Errorf("the backend's counter holds %d, want the 10 it admitted and the 45 admitted locally", used)
	}
	if reconciled != 45 || r.Stats().Reconciled != 45 || r.Stats().Keys != 0 {
		t.Errorf("reconciled %d (stats %+v), want 45 and no counter left", reconciled, r.Stats())
	}
	before = b.callCount()
	if got := admitted(t, r, 50, local("k", lim)); got != 45 || b.callCount()-before != 50 {
		t.Errorf("after the pass: admitted %d in %d backend calls, want the 45 left, each decided by the backend", got, b.callCount()-before)
	}
}

// A reconcile call whose reply is lost may have run: it is sent again as
// it was, with the same marker, so the hits are charged once whether it
// ran or not.
func TestReconcileChargesOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(b *backend)
	}{
		{"the call ran, its reply was lost", func(b *backend) { b.loseReplies(1) }},
		{"the call never ran", func(b *backend) { b.setDown(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeclock.New(t0.Add(time.Second))
			b := newBackend(t, clock)
			r := replica(t, b, nil)
			lim := perMinute(100)
			b.setDown(true)
			if got := admitted(t, r, 7, local("k", lim)); got != 7 {
				t.Fatalf("admitted %d of 7 locally", got)
			}
			b.setDown(false)
			tc.lose(b)
			if left := r.Reconcile(context.Background()); left != 1 {
				t.Fatalf("after a failed charge, %d counters left, want 1", left)
			}
			b.setDown(false)
			admitted(t, r, 2, local("k", lim)) // decided locally: still pending
			clock.Advance(time.Second)
			if left := r.Reconcile(context.Background()); left != 0 {
				t.Fatalf("%d counters left after the retry", left)
			}
			if used := b.used(t, "k", lim); used != 9 {
				t.Errorf("the backend's counter holds %d, want the 9 admitted locally, each once", used)
			}
		})
	}
}

// Hits admitted in a window that ended before the backend answered are not
// charged to the next window: they are dropped.
func TestEndedWindowIsNotCharged(t *testing.T) {
	clock := fakeclock.New(t0.Add(50 * time.Second))
	b := newBackend(t, clock)
	var dropped uint64
	r := replica(t, b, nil, fallback.WithDropped(func(key string, hits uint64) { dropped += hits }))
	lim := perMinute(100)
	b.setDown(true)
	admitted(t, r, 6, local("k", lim))
	clock.Set(t0.Add(time.Minute + time.Second))
	b.setDown(false)
	if left := r.Reconcile(context.Background()); left != 0 {
		t.Fatalf("%d counters left", left)
	}
	if used := b.used(t, "k", lim); used != 0 || dropped != 6 {
		t.Errorf("the next window's counter holds %d and %d hits were dropped, want 0 and 6", used, dropped)
	}
	// Hits of both windows: only the current one's are charged.
	b.setDown(true)
	clock.Set(t0.Add(time.Minute + 59*time.Second))
	admitted(t, r, 4, local("k", lim))
	clock.Set(t0.Add(2*time.Minute + time.Second))
	admitted(t, r, 3, local("k", lim))
	b.setDown(false)
	r.Reconcile(context.Background())
	if used := b.used(t, "k", lim); used != 3 || dropped != 10 {
		t.Errorf("the third window's counter holds %d and %d hits were dropped, want 3 and 10", used, dropped)
	}
}

// A backend that comes back empty (a Redis restarted without its data)
// gets back, with the hits admitted locally, each replica's share of what
// it had counted before the outage; one that kept its data gets only the
// hits admitted locally.
func TestBackendRestartedEmpty(t *testing.T) {
	for _, empty := range []bool{true, false} {
		clock := fakeclock.New(t0.Add(time.Second))
		b := newBackend(t, clock)
		p := newPresence(b, 3*time.Second)
		a, c := replica(t, b, p), replica(t, b, p)
		beat(t, a, c, a, c)
		lim := perMinute(100)
		for range 30 { // each sees about 40 left at the end
			admitted(t, a, 1, local("k", lim))
			admitted(t, c, 1, local("k", lim))
		}
		b.setDown(true)
		localA := admitted(t, a, 30, local("k", lim))
		localC := admitted(t, c, 30, local("k", lim))
		if localA != 20 || localC != 20 {
			t.Fatalf("admitted %d and %d locally, want 20 each (half of the 40 left)", localA, localC)
		}
		if empty {
			b.restartEmpty()
		} else {
			b.setDown(false)
		}
		a.Reconcile(context.Background())
		c.Reconcile(context.Background())
		if used := b.used(t, "k", lim); used != 100 {
			t.Errorf("restarted empty %t: the counter holds %d after reconciling, want 100 (60 before the outage, 40 during)", empty, used)
		}
	}
}

// A request decided by the backend with an unknown outcome (it may have
// charged it) is answered locally but never charged again.
func TestUnknownOutcomeIsNotChargedAgain(t *testing.T) {
	_, b, r := rig(t)
	lim := perMinute(100)
	b.loseReplies(1)
	res, err := r.Take(context.Background(), []store.Request{local("k", lim)})
	if err != nil || !res[0].Allowed || !res[0].Local {
		t.Fatalf("a call whose reply was lost: %+v %v, want admitted locally", res, err)
	}
	if left := r.Reconcile(context.Background()); left != 0 {
		t.Fatalf("%d counters left", left)
	}
	if used, st := b.used(t, "k", lim), r.Stats(); used != 1 || st.Dropped != 1 || st.Reconciled != 0 {
		t.Errorf("the counter holds %d (stats %+v), want 1: the lost call's own charge, not charged again", used, st)
	}
}

// A replica whose hits the backend took keeps deciding locally, charging
// as it goes, while another replica has not reached the backend yet: the
// backend's count lacks that one's hits, and deciding there would admit
// them again. Once no replica is still local, each hands its counters back.
func TestHandBackOnceNoReplicaIsLocal(t *testing.T) {
	clock := fakeclock.New(t0.Add(time.Second))
	b := newBackend(t, clock)
	p := newPresence(b, 3*time.Second)
	a, c := replica(t, b, p), replica(t, b, p)
	beat(t, a, c, a)
	lim := perMinute(100)
	b.setDown(true)
	admitted(t, a, 10, local("k", lim))
	admitted(t, c, 10, local("k", lim))
	clock.Advance(time.Second)
	b.setDown(false)
	a.Reconcile(context.Background()) // c has not reconciled yet
	if used := b.used(t, "k", lim); used != 10 {
		t.Fatalf("after a's pass the counter holds %d, want a's 10", used)
	}
	before := b.callCount()
	admitted(t, a, 5, local("k", lim))
	if calls := b.callCount() - before; calls != 0 {
		t.Errorf("a asked the backend %d times while c was still local, want 0", calls)
	}
	for range 3 {
		a.Reconcile(context.Background())
	}
	if left := a.Stats().Keys; left != 1 {
		t.Errorf("a handed its counter back while c's hits were not in the backend (%d left)", left)
	}
	c.Reconcile(context.Background())
	c.Reconcile(context.Background()) // c's beat now says it is not local
	a.Reconcile(context.Background())
	if a.Stats().Keys != 0 || c.Stats().Keys != 0 {
		t.Errorf("counters still local: a %d, c %d; want both handed back", a.Stats().Keys, c.Stats().Keys)
	}
	if used := b.used(t, "k", lim); used != 25 {
		t.Errorf("the counter holds %d, want the 25 admitted", used)
	}
}

// A replica closed with hits admitted locally charges them on its way out
// when the backend answers.
func TestCloseCharges(t *testing.T) {
	_, b, r := rig(t)
	lim := perMinute(100)
	b.setDown(true)
	admitted(t, r, 4, local("k", lim))
	b.setDown(false)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if used := b.used(t, "k", lim); used != 4 {
		t.Errorf("after Close the counter holds %d, want the 4 admitted locally", used)
	}
}

// A presence that fails while the backend answers (its commands refused)
// does not keep counters local for ever: after ten heartbeats without a
// beat they go back as without a presence.
func TestBrokenPresenceReleases(t *testing.T) {
	clock := fakeclock.New(t0.Add(time.Second))
	b := newBackend(t, clock)
	p := &breakable{presence: newPresence(b, 3*time.Second)}
	r := replica(t, b, p)
	beat(t, r)
	lim := perMinute(100)
	b.setDown(true)
	admitted(t, r, 3, local("k", lim))
	p.broken.Store(true)
	b.setDown(false)
	clock.Advance(5 * time.Second)
	r.Reconcile(context.Background())
	if used, left := b.used(t, "k", lim), r.Stats().Keys; used != 3 || left != 1 {
		t.Errorf("5 s after the last beat: the counter holds %d, %d counters local; want 3 charged and still local", used, left)
	}
	clock.Advance(10 * time.Second)
	if left := r.Reconcile(context.Background()); left != 0 {
		t.Errorf("15 s after the last beat, %d counters still local", left)
	}
}

// breakable is a presence whose beats fail once broken, as Redis refuses
// commands an ACL lacks while it answers the rest.
type breakable struct {
	*presence
	broken atomic.Bool
}

func (p *breakable) Beat(ctx context.Context, id string, local bool) (fallback.Members, error) {
	if p.broken.Load() {
		return fallback.Members{}, errors.New("NOPERM")
	}
	return p.presence.Beat(ctx, id, local)
}

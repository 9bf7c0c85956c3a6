package fallback_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
)

// Three replicas that have seen each other decide an outage with a third
// of the limit each, answering the remaining of their share; together they
// admit the limit, not three.
func TestSharesOfLiveReplicas(t *testing.T) {
	clock := fakeclock.New(t0.Add(time.Second))
	b := newBackend(t, clock)
	p := newPresence(b, 3*time.Second)
	rs := []*fallback.Store{replica(t, b, p), replica(t, b, p), replica(t, b, p)}
	beat(t, rs...)
	beat(t, rs...) // the first beats each saw those before them only
	lim := perMinute(30)
	b.setDown(true)
	total := 0
	for i, r := range rs {
		res, err := r.Take(context.Background(), []store.Request{local("k", lim)})
		if err != nil || !res[0].Allowed || !res[0].Local || res[0].Remaining != 9 {
			t.Fatalf("replica %d's first local decision: %+v %v, want allowed locally with 9 of its 10 left", i, res, err)
		}
		total += 1 + admitted(t, r, 20, local("k", lim))
		if got := r.Stats().Replicas; got != 3 {
			t.Errorf("replica %d shares by %d, want 3", i, got)
		}
	}
	if total != 30 {
		t.Errorf("three replicas admitted %d of a limit of 30 while the backend was down, want 30", total)
	}
}

// A replica that never saw another (started while the backend was down,
// or alone so far) shares by WithReplicas; one that joins changes the
// others' shares only once they have beaten since.
func TestColdStartAndJoining(t *testing.T) {
	clock := fakeclock.New(t0.Add(time.Second))
	b := newBackend(t, clock)
	p := newPresence(b, 3*time.Second)
	lim := perMinute(60)

	cold := replica(t, b, p, fallback.WithReplicas(4))
	b.setDown(true)
	if got := admitted(t, cold, 30, local("cold", lim)); got != 15 {
		t.Errorf("a replica that never beat admitted %d of 60 with WithReplicas(4), want 15", got)
	}
	b.setDown(false)

	a := replica(t, b, p, fallback.WithReplicas(4))
	beat(t, a)
	if got := a.Stats().Replicas; got != 4 {
		t.Errorf("a replica that saw only itself shares by %d, want WithReplicas' 4", got)
	}
	other := replica(t, b, p)
	beat(t, other, a)
	if got := a.Stats().Replicas; got != 2 {
		t.Errorf("after seeing another, shares by %d, want 2", got)
	}
	joining := replica(t, b, p)
	beat(t, joining)
	if got := a.Stats().Replicas; got != 2 {
		t.Errorf("a replica joined but not seen yet: shares by %d, want still 2", got)
	}
	b.setDown(true)
	if got := admitted(t, a, 40, local("joined", lim)); got != 30 {
		t.Errorf("before seeing the third replica, admitted %d of 60, want its half: 30", got)
	}
	b.setDown(false)
	beat(t, a)
	if got := a.Stats().Replicas; got != 3 {
		t.Errorf("after its next beat, shares by %d, want 3", got)
	}
	b.setDown(true)
	if got := admitted(t, a, 40, local("seen", lim)); got != 20 {
		t.Errorf("after seeing the third replica, admitted %d of 60, want a third: 20", got)
	}
	// A replica that leaves is out of the others' count at their next beat.
	b.setDown(false)
	if err := joining.Close(); err != nil {
		t.Fatal(err)
	}
	beat(t, a)
	if got := a.Stats().Replicas; got != 2 {
		t.Errorf("after one replica left, shares by %d, want 2", got)
	}
}

// A counter half spent when the backend goes down starts, locally, from
// this replica's share of what the backend said was left, not from a full
// share: the window holds the limit, not the limit plus a share.
func TestStartsFromTheBackendsLastAnswer(t *testing.T) {
	clock := fakeclock.New(t0.Add(time.Second))
	b := newBackend(t, clock)
	p := newPresence(b, 3*time.Second)
	a, c := replica(t, b, p), replica(t, b, p)
	beat(t, a, c, a)
	lim := perMinute(40)
	if got := admitted(t, a, 24, local("k", lim)); got != 24 {
		t.Fatalf("admitted %d of the first 24 with the backend up", got)
	}
	b.setDown(true)
	// The backend had 16 left: each of two replicas gets 8, but c never
	// heard an answer for k, so it starts from a full share (20): the
	// bound is the limit plus what a replica did not see.
	if got := admitted(t, a, 20, local("k", lim)); got != 8 {
		t.Errorf("the replica that saw 16 left admitted %d locally, want its half: 8", got)
	}
	if got := admitted(t, c, 30, local("k", lim)); got != 20 {
		t.Errorf("the replica that saw no answer admitted %d locally, want a full share: 20", got)
	}
	// An answer from an ended window says nothing of the next.
	clock.Set(t0.Add(time.Minute + time.Second))
	if got := admitted(t, a, 30, local("k", lim)); got != 20 {
		t.Errorf("in the next window, admitted %d locally, want a full share: 20", got)
	}
}

// A share rounds down, so shares never add up to more than the limit; a
// burst is shared like the rate.
func TestShareRoundsDown(t *testing.T) {
	clock := fakeclock.New(t0.Add(time.Second))
	b := newBackend(t, clock)
	bucket := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Burst: 7, Period: time.Minute}
	for _, tc := range []struct {
		lim      algorithms.Limit
		replicas int
		want     int
	}{
		{perMinute(10), 3, 3},
		{perMinute(2), 3, 0},
		{bucket, 3, 2},
		{bucket, 8, 0},
	} {
		r := replica(t, b, nil, fallback.WithReplicas(tc.replicas))
		b.setDown(true)
		if got := admitted(t, r, 20, local("share", tc.lim)); got != tc.want {
			t.Errorf("%+v over %d replicas: admitted %d locally, want %d", tc.lim, tc.replicas, got, tc.want)
		}
		b.setDown(false)
		r.Forget("share")
	}
}

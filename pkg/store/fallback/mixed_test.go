package fallback_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
)

// A batch mixing local requests with others is decided all-or-nothing with
// what the others' fallbacks say: allow admits (the local hits charged),
// deny denies (nothing charged), and a request without a fallback leaves
// the batch undecided (an error, nothing charged) unless the rest denies
// it anyway. Shadow and quota modes count as when the backend decides.
func TestMixedBatches(t *testing.T) {
	lim := perMinute(10)
	with := func(f store.Fallback, mode algorithms.Mode) store.Request {
		return store.Request{Key: "other", Limit: lim, Hits: 1, Mode: mode, Fallback: f}
	}
	full := func(key string) store.Request { return local(key, perMinute(0)) } // its share denies it
	quota := func(r store.Request) store.Request {
		r.Mode = algorithms.Quota
		return r
	}
	for _, tc := range []struct {
		name      string
		batch     []store.Request
		undecided bool
		denied    bool
		charged   uint64 // local hits pending on "k"
	}{
		{"local and allow", []store.Request{local("k", lim), with(store.FallbackAllow, algorithms.Enforce)}, false, false, 1},
		{"local and deny", []store.Request{local("k", lim), with(store.FallbackDeny, algorithms.Enforce)}, false, true, 0},
		{"local and a shadow deny", []store.Request{local("k", lim), with(store.FallbackDeny, algorithms.Shadow)}, false, false, 1},
		{"a quota deny alone", []store.Request{local("k", lim), with(store.FallbackDeny, algorithms.Quota)}, false, true, 0},
		{"a quota deny beside a local quota", []store.Request{quota(local("k", lim)), with(store.FallbackDeny, algorithms.Quota)}, false, false, 1},
		{"local and none", []store.Request{local("k", lim), with(store.FallbackNone, algorithms.Enforce)}, true, false, 0},
		{"local denied and none", []store.Request{full("k"), with(store.FallbackNone, algorithms.Enforce)}, false, true, 0},
		{"two local, one denied", []store.Request{local("k", lim), full("j")}, false, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeclock.New(t0.Add(time.Second))
			b := newBackend(t, clock)
			r := replica(t, b, nil)
			b.setDown(true)
			res, err := r.Take(context.Background(), tc.batch)
			switch {
			case tc.undecided:
				if err == nil || !errors.Is(err, errDown) {
					t.Fatalf("got %+v %v, want the backend's error", res, err)
				}
			case err != nil:
				t.Fatal(err)
			case store.VerdictOf(tc.batch, res).Denied() != tc.denied:
				t.Fatalf("results %+v: denied %t, want %t", res, !tc.denied, tc.denied)
			}
			for _, x := range res {
				if !x.Local {
					t.Errorf("result %+v not marked Local", x)
				}
			}
			b.setDown(false)
			r.Reconcile(context.Background())
			if used := b.used(t, "k", lim); used != tc.charged {
				t.Errorf("the backend's counter of k holds %d after reconciling, want %d", used, tc.charged)
			}
		})
	}
}

// A refund answered locally gives this replica's share room back and takes
// back what it can of the hits pending for the backend.
func TestRefundDuringOutage(t *testing.T) {
	_, b, r := rig(t)
	lim := perMinute(5)
	b.setDown(true)
	admitted(t, r, 5, local("k", lim))
	refund := local("k", lim)
	refund.Mode, refund.Hits = algorithms.NegativeHits, 2
	if _, err := r.Take(context.Background(), []store.Request{refund}); err != nil {
		t.Fatal(err)
	}
	if got := admitted(t, r, 5, local("k", lim)); got != 2 {
		t.Errorf("after refunding 2, admitted %d locally, want 2", got)
	}
	b.setDown(false)
	r.Reconcile(context.Background())
	if used := b.used(t, "k", lim); used != 5 {
		t.Errorf("the counter holds %d, want the 5 admitted in all", used)
	}
}

// Requests without a Local one never touch the local store, and a backend
// answer is passed on as it is.
func TestWithoutLocalPassesThrough(t *testing.T) {
	_, b, r := rig(t)
	req := local("k", perMinute(3))
	req.Fallback = store.FallbackAllow
	b.setDown(true)
	if _, err := r.Take(context.Background(), []store.Request{req}); !errors.Is(err, errDown) {
		t.Errorf("a batch without a Local request: %v, want the backend's error", err)
	}
	b.setDown(false)
	res, err := r.Take(context.Background(), []store.Request{req})
	if err != nil || res[0].Local || res[0].Remaining != 2 {
		t.Errorf("%+v %v, want the backend's own answer", res, err)
	}
	if st := r.Stats(); st.Decisions != 0 || st.Keys != 0 {
		t.Errorf("stats %+v, want nothing decided locally", st)
	}
}

// Concurrent requests decided locally while passes reconcile and the
// backend flaps admit, in all, what the backend ends up holding, and at
// most the limit plus the calls in flight when the backend failed (one per
// caller: docs/operations.md's bound for one replica; a CI run admitted
// 1,001 of 1,000). Each flip waits for an answer since the last, so that
// every phase sees requests: the counter goes local, back and local again.
// Run with -race.
func TestConcurrentOutage(t *testing.T) {
	_, b, r := rig(t)
	const callers = 4
	lim := perMinute(1000)
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	stop := make(chan struct{})
	answered := make(chan struct{}, callers)
	for range callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := admitted(t, r, 1, local("k", lim))
				mu.Lock()
				total += n
				mu.Unlock()
				select {
				case answered <- struct{}{}:
				default:
				}
			}
		})
	}
	for i := range 40 {
		<-answered
		b.setDown(i%2 == 0)
		r.Reconcile(context.Background())
	}
	close(stop)
	wg.Wait()
	b.setDown(false)
	for r.Reconcile(context.Background()) > 0 {
	}
	if used := b.used(t, "k", lim); used != uint64(min(total, 1000)) || total > 1000+callers {
		t.Errorf("admitted %d, the counter holds %d: want them equal up to 1000, and at most 1000 + %d in flight", total, used, callers)
	}
}

// Past WithMaxKeys counters decided locally, a new counter fails as it
// would without the decorator; those decided already go on.
func TestMaxKeys(t *testing.T) {
	_, b, r := rig(t, fallback.WithMaxKeys(2))
	lim := perMinute(10)
	b.setDown(true)
	admitted(t, r, 1, local("a", lim))
	admitted(t, r, 1, local("b", lim))
	if _, err := r.Take(context.Background(), []store.Request{local("c", lim)}); !errors.Is(err, errDown) {
		t.Errorf("a third counter: %v, want the backend's error", err)
	}
	if got := admitted(t, r, 3, local("a", lim)); got != 3 {
		t.Errorf("a counter decided already admitted %d of 3", got)
	}
}

// A batch naming a counter still decided locally goes to the backend all
// the same when a request without a fallback needs its answer.
func TestStuckBatchWithoutFallbackAsksTheBackend(t *testing.T) {
	_, b, r := rig(t)
	lim := perMinute(10)
	b.setDown(true)
	admitted(t, r, 1, local("k", lim))
	b.setDown(false)
	other := local("other", lim)
	other.Fallback = store.FallbackNone
	res, err := r.Take(context.Background(), []store.Request{local("k", lim), other})
	if err != nil || res[0].Local || !res[0].Allowed {
		t.Errorf("%+v %v, want the backend's answer", res, err)
	}
	alone, err := r.Take(context.Background(), []store.Request{local("k", lim)})
	if err != nil || !alone[0].Local {
		t.Errorf("%+v %v, want k alone still decided locally", alone, err)
	}
}

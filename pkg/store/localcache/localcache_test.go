package localcache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// The cache must never change an answer: the whole conformance suite runs
// through it.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) store.Store {
		return localcache.New(memstore.New(memstore.WithClock(clock.Now)), 1<<20, localcache.WithClock(clock.Now))
	})
}

// counting counts the batches that reach the backend.
type counting struct {
	store.Store
	calls atomic.Int64
}

func (c *counting) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	c.calls.Add(1)
	return c.Store.Take(ctx, reqs)
}

// rig is a cache over a counted memstore on a fake clock.
type rig struct {
	t       *testing.T
	clock   *storetest.Clock
	backend *counting
	cache   *localcache.Store
}

func newRig(t *testing.T, maxBytes int) *rig {
	clock := storetest.NewClock(storetest.Epoch())
	backend := &counting{Store: memstore.New(memstore.WithClock(clock.Now))}
	return &rig{t: t, clock: clock, backend: backend, cache: localcache.New(backend, maxBytes, localcache.WithClock(clock.Now))}
}

func (r *rig) take(reqs ...store.Request) []store.Result {
	r.t.Helper()
	res, err := r.cache.Take(context.Background(), reqs)
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

// one takes a single request and reports its result and whether it reached
// the backend.
func (r *rig) one(req store.Request) (store.Result, bool) {
	r.t.Helper()
	before := r.backend.calls.Load()
	res := r.take(req)[0]
	reached := r.backend.calls.Load() != before
	if res.FromCache == reached {
		r.t.Fatalf("FromCache %v but reached the backend %v", res.FromCache, reached)
	}
	return res, reached
}

func req(key string, lim algorithms.Limit, hits uint64) store.Request {
	return store.Request{Key: key, Limit: lim, Hits: hits}
}

func fw(n uint64) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: time.Minute}
}

func TestFixedWindowCachedUntilWindowEnd(t *testing.T) {
	r := newRig(t, 1<<20)
	r.clock.Advance(20 * time.Second) // 40 s left in the minute's window
	r.take(req("k", fw(2), 2))
	if res, reached := r.one(req("k", fw(2), 1)); res.Allowed || !reached {
		t.Fatalf("first denial %+v must come from the backend", res)
	}
	r.clock.Advance(10 * time.Second)
	res, reached := r.one(req("k", fw(2), 1))
	want := algorithms.Decision{ResetAfter: 30 * time.Second, RetryAfter: 30 * time.Second}
	if reached || res.Decision != want {
		t.Fatalf("10 s later: %+v (backend %v), want %+v from the cache", res, reached, want)
	}
	// More hits than the limit can ever admit: still denied, never retryable.
	if res, reached := r.one(req("k", fw(2), 3)); reached || res.RetryAfter != algorithms.Never {
		t.Fatalf("3 hits of 2: %+v (backend %v), want Never from the cache", res, reached)
	}
	r.clock.Advance(30*time.Second - time.Microsecond)
	if res, reached := r.one(req("k", fw(2), 1)); reached || res.RetryAfter != time.Microsecond {
		t.Fatalf("1 µs before the window ends: %+v (backend %v)", res, reached)
	}
	r.clock.Advance(time.Microsecond)
	if res, reached := r.one(req("k", fw(2), 1)); !reached || !res.Allowed {
		t.Fatalf("at the window's end: %+v (backend %v), want admitted by the backend", res, reached)
	}
}

// Every other algorithm: a single hit denied with nothing left is cached
// until exactly RetryAfter, when the backend admits it.
func TestContinuousCachedUntilRetryAfter(t *testing.T) {
	limits := map[string]algorithms.Limit{
		"token_bucket":   {Algorithm: algorithms.TokenBucket, Requests: 6, Period: time.Minute},
		"token_bucket_i": {Algorithm: algorithms.TokenBucket, Requests: 6, Period: time.Minute, RefillInterval: 20 * time.Second},
		"token_debt":     {Algorithm: algorithms.TokenBucket, Requests: 6, Period: time.Minute, MaxDebt: 2},
		"leaky_bucket":   {Algorithm: algorithms.LeakyBucket, Requests: 6, Period: time.Minute},
		"gcra":           {Algorithm: algorithms.GCRA, Requests: 7, Period: time.Minute, Burst: 2},
		"sliding_log":    {Algorithm: algorithms.SlidingLog, Requests: 3, Period: time.Minute},
		"sliding_window": {Algorithm: algorithms.SlidingWindow, Requests: 3, Period: time.Minute},
	}
	for name, lim := range limits {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, 1<<20)
			r.clock.Advance(7 * time.Second)
			var denial store.Result
			for i := range 20 {
				res, _ := r.one(req("k", lim, 1))
				if !res.Allowed {
					denial = res
					break
				}
				if i == 19 {
					t.Fatal("never denied")
				}
			}
			if denial.FromCache || denial.Remaining != 0 || denial.RetryAfter <= time.Microsecond {
				t.Fatalf("first denial %+v", denial)
			}
			step := denial.RetryAfter / 3
			r.clock.Advance(step)
			res, reached := r.one(req("k", lim, 1))
			want := algorithms.Decision{ResetAfter: denial.ResetAfter - step, RetryAfter: denial.RetryAfter - step}
			if reached || res.Decision != want {
				t.Fatalf("%s later: %+v (backend %v), want %+v from the cache", step, res, reached, want)
			}
			// Two hits wait longer than the entry knows: the backend answers.
			if _, reached := r.one(req("k", lim, 2)); !reached {
				t.Fatal("2 hits answered by an entry for 1")
			}
			r.clock.Advance(denial.RetryAfter - step - time.Microsecond)
			if res, reached := r.one(req("k", lim, 1)); reached || res.RetryAfter != time.Microsecond {
				t.Fatalf("1 µs before RetryAfter: %+v (backend %v)", res, reached)
			}
			r.clock.Advance(time.Microsecond)
			if res, reached := r.one(req("k", lim, 1)); !reached || !res.Allowed {
				t.Fatalf("at RetryAfter: %+v (backend %v), want admitted by the backend", res, reached)
			}
		})
	}
}

// Denials whose numbers would go stale while they wait are not cached.
func TestUncachedDenials(t *testing.T) {
	bucket := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 6, Period: time.Minute}
	tests := []struct {
		name  string
		setup []store.Request
		probe store.Request
	}{
		{"bucket: 3 hits denied with 1 left", []store.Request{req("k", bucket, 5)}, req("k", bucket, 3)},
		// A refund of a counter with room left is not published: a denial
		// it could lift is not cached.
		{"fixed window: 4 hits denied with 2 left", []store.Request{req("k", fw(5), 3)}, req("k", fw(5), 4)},
		{"bucket: more hits than it holds", nil, req("k", bucket, 7)},
		{"check denied in debt", []store.Request{req("k", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 6, Period: time.Minute, MaxDebt: 2}, 8)},
			req("k", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 6, Period: time.Minute, MaxDebt: 2}, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1<<20)
			for _, s := range tc.setup {
				r.take(s)
			}
			if res, _ := r.one(tc.probe); res.Allowed {
				t.Fatalf("probe admitted: %+v", res)
			}
			if res, reached := r.one(tc.probe); !reached {
				t.Fatalf("second probe answered from the cache: %+v", res)
			}
			if n, _ := r.cache.Len(); n != 0 {
				t.Fatalf("%d entries, want none", n)
			}
		})
	}
}

// Batches the cache cannot answer whole go to the backend whole.
func TestBatchesNeedingTheBackend(t *testing.T) {
	shadow := req("k", fw(1), 1)
	shadow.Mode = algorithms.Shadow
	quota := req("k", fw(1), 1)
	quota.Mode = algorithms.Quota
	joined := req("other", fw(5), 1)
	joined.Joined = true
	tests := map[string][]store.Request{
		"another key": {req("k", fw(1), 1), req("other", fw(5), 1)},
		// One limit of a descriptor spent (rate_limits): the backend
		// reports the others, which the cache does not know.
		"another limit of the descriptor": {req("k", fw(1), 1), joined},
		"same key twice":                  {req("k", fw(1), 1), req("k", fw(1), 1)},
		"shadow mode":                     {shadow},
		"quota mode":                      {quota},
		"a changed limit":                 {req("k", fw(2), 1)},
		"fewer hits":                      {req("k", fw(1), 0)},
		"empty batch":                     {},
		"another algorithm":               {req("k", algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 1, Period: time.Minute}, 1)},
	}
	for name, batch := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, 1<<20)
			r.take(req("k", fw(1), 1))
			r.take(req("k", fw(1), 1)) // denied: cached
			if res, reached := r.one(req("k", fw(1), 1)); reached || res.Allowed {
				t.Fatalf("setup: %+v (backend %v)", res, reached)
			}
			before := r.backend.calls.Load()
			for i, res := range r.take(batch...) {
				if res.FromCache {
					t.Errorf("op %d answered from the cache: %+v", i, res)
				}
			}
			if r.backend.calls.Load() != before+1 {
				t.Fatalf("backend calls %d, want 1", r.backend.calls.Load()-before)
			}
		})
	}
}

// An entry whose window has ended but which nobody looked up since must
// not lend its fewer hits to a denial in the next window.
func TestStaleEntryIsReplaced(t *testing.T) {
	r := newRig(t, 1<<20)
	r.take(req("k", fw(5), 5))
	r.take(req("k", fw(5), 1)) // denied: 1 hit, until the minute ends
	r.clock.Advance(time.Minute)
	// Next window: "other" misses first, so k's expired entry is not looked
	// at before the backend denies 6 hits of 5 (5 remaining).
	r.take(req("other", fw(5), 1), req("k", fw(5), 6))
	if res, reached := r.one(req("k", fw(5), 1)); !res.Allowed || !reached {
		t.Fatalf("1 hit with 5 left: %+v (backend %v), want admitted by the backend", res, reached)
	}
}

// A refund on this replica changes the key: its entry goes, and the next
// requests are the backend's to answer.
func TestRefundDropsEntry(t *testing.T) {
	r := newRig(t, 1<<20)
	r.take(req("k", fw(5), 5))
	if res, _ := r.one(req("k", fw(5), 1)); res.Allowed {
		t.Fatal("a 6th hit of 5 admitted")
	}
	if _, reached := r.one(req("k", fw(5), 1)); reached {
		t.Fatal("the denial was not cached")
	}
	refund := req("k", fw(5), 2)
	refund.Mode = algorithms.NegativeHits
	if res, reached := r.one(refund); !reached || !res.Allowed || res.Remaining != 2 {
		t.Fatalf("refund: %+v (backend %v), want the backend's 2 remaining", res, reached)
	}
	for i, want := range []bool{true, true, false} {
		if res, reached := r.one(req("k", fw(5), 1)); !reached || res.Allowed != want {
			t.Fatalf("hit %d after the refund: %+v (backend %v), want allowed=%v from the backend", i, res, reached, want)
		}
	}
}

package redisstore_test

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// TestDeniedRequestsRefillNothing: issue 35's two scenarios on a
// three-master Cluster, the keys' hash tags on three masters ({a}, {b},
// {c}), all at one instant: token buckets of 10 an hour emptied, a rule of
// 1 an hour used up, and requests of 30 hits on them denied three times
// (each slot group records its shadow ops, and quota ops spread over two
// groups run as shadow ops, past their limits: the undo must take back
// exactly that). Afterwards the buckets are as empty as before: a quota
// request on both is over its limit with nothing left, and the shadow
// bucket reports nothing left.
func TestDeniedRequestsRefillNothing(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	s := newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), fixedClock())
	bucket := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Hour, Burst: 10}
	one := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Period: time.Hour}
	op := func(key string, lim algorithms.Limit, hits uint64, m algorithms.Mode) store.Request {
		return store.Request{Key: key, Limit: lim, Hits: hits, Mode: m}
	}
	denied := func(what string, reqs ...store.Request) []store.Result {
		t.Helper()
		res := mustTake(t, s, reqs)
		if !store.VerdictOf(reqs, res).Denied() {
			t.Errorf("%s: %+v, want the request denied", what, res)
		}
		return res
	}
	t.Run("quota_token_bucket", func(t *testing.T) {
		q, q2, n := "{b}q", "{c}q", "{a}n"
		mustTake(t, s, []store.Request{op(q, bucket, 10, algorithms.Enforce)})
		mustTake(t, s, []store.Request{op(q2, bucket, 10, algorithms.Enforce)})
		mustTake(t, s, []store.Request{op(n, one, 1, algorithms.Enforce)})
		for range 3 {
			denied("q, q' and n, 30 hits each", op(q, bucket, 30, algorithms.Quota), op(q2, bucket, 30, algorithms.Quota), op(n, one, 30, algorithms.Enforce))
		}
		res := denied("q and q' afterwards", op(q, bucket, 1, algorithms.Quota), op(q2, bucket, 1, algorithms.Quota))
		for i, r := range res {
			if r.Allowed || r.Remaining != 0 {
				t.Errorf("quota op %d afterwards: %+v, want over the limit with 0 left", i, r.Decision)
			}
		}
	})
	t.Run("shadow_token_bucket", func(t *testing.T) {
		sh, n := "{b}s", "{a}n2"
		mustTake(t, s, []store.Request{op(sh, bucket, 10, algorithms.Enforce)})
		mustTake(t, s, []store.Request{op(n, one, 1, algorithms.Enforce)})
		for range 3 {
			denied("the shadow bucket and n, 30 hits each", op(sh, bucket, 30, algorithms.Shadow), op(n, one, 30, algorithms.Enforce))
		}
		if r := mustTake(t, s, []store.Request{op(sh, bucket, 1, algorithms.Shadow)})[0]; r.Allowed || r.Remaining != 0 {
			t.Errorf("the shadow bucket afterwards: %+v, want over the limit with 0 left", r.Decision)
		}
	})
}

package stack_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/stack"
)

// The daemon's store on the embedded store, with the local over-limit
// cache: once a counter is spent, its denials are answered from the cache.
// (The clock is fixed here so that the window cannot end mid-example.)
func Example() {
	now := func() time.Time { return time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC) }
	stk, err := stack.New(
		stack.WithMemory(memstore.WithMaxKeys(100_000), memstore.WithClock(now)),
		stack.WithLocalCache(1<<20, localcache.WithClock(now)),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stk.Close()
	twoAMinute := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: time.Minute}
	for range 4 {
		res, err := stk.Store.Take(context.Background(), []store.Request{{Key: "user:alice", Limit: twoAMinute, Hits: 1}})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("allowed:", res[0].Allowed, "from cache:", res[0].FromCache)
	}
	// Output:
	// allowed: true from cache: false
	// allowed: true from cache: false
	// allowed: false from cache: false
	// allowed: false from cache: true
}

// The daemon's store on Redis: the lease decorator over redisstore, the
// local cache over it, told of other replicas' refunds. (Not run: it needs
// a Redis at localhost:6379; TestRedis builds the same on a real one.)
func ExampleWithRedis() {
	stk, err := stack.New(
		stack.WithRedis(redisstore.WithAddr("localhost:6379"), redisstore.WithTimeout(50*time.Millisecond)),
		stack.WithLocalCache(64<<20),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stk.Close()
	fmt.Println(stk.Redis != nil, stk.Lease != nil, stk.Cache != nil)
}

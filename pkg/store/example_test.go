package store_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// A Store decides a batch of requests atomically; VerdictOf reads
// whether the batch as a whole was denied. The embedded memstore needs no
// server; redisstore behaves the same against Redis.
func ExampleStore() {
	now := time.Unix(1_700_000_000, 0)
	var s store.Store = memstore.New(memstore.WithClock(func() time.Time { return now }))
	defer s.Close()
	lim := algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 2, Period: time.Second}
	reqs := []store.Request{
		{Key: "api:alice", Limit: lim, Hits: 1},
		// A shadow rule reports its verdict but never denies the batch.
		{Key: "api:shadow", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Period: time.Second}, Hits: 1, Mode: algorithms.Shadow},
	}
	for i := range 3 {
		res, err := s.Take(context.Background(), reqs)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("request %d: denied=%v alice.remaining=%d shadow.allowed=%v\n",
			i+1, store.VerdictOf(reqs, res).Denied(), res[0].Remaining, res[1].Allowed)
	}
	// Output:
	// request 1: denied=false alice.remaining=1 shadow.allowed=false
	// request 2: denied=false alice.remaining=0 shadow.allowed=false
	// request 3: denied=true alice.remaining=0 shadow.allowed=false
}

package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// A Go program that wants ratelimitd's limits without the daemon hands the
// store its own go-redis client: every algorithm, one atomic script call per
// Take, Redis TIME. (Not run: it needs a Redis at localhost:6379.)
func ExampleWithClient() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	s, err := redisstore.New(redisstore.WithClient(rdb), redisstore.WithTimeout(50*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close() // the client stays the caller's
	perUser := algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 10, Period: time.Second, Burst: 20}
	res, err := s.Take(context.Background(), []store.Request{{Key: "api:user:alice", Limit: perUser, Hits: 1}})
	if err != nil {
		fmt.Println("redis unavailable:", err) // fail open or closed: the caller's choice
		return
	}
	fmt.Println("allowed:", res[0].Allowed, "remaining:", res[0].Remaining, "retry after:", res[0].RetryAfter)
}

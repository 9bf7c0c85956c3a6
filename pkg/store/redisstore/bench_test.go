package redisstore_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

func BenchmarkTake(b *testing.B) {
	srv := redistest.Start(b)
	s, err := redisstore.New(redisstore.WithAddr(srv.Addr))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, n := range []int{1, 3, 10} {
		b.Run(fmt.Sprintf("fixed_window/%dkeys", n), func(b *testing.B) {
			lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1 << 30, Period: time.Hour}
			b.RunParallel(func(pb *testing.PB) {
				reqs := make([]store.Request, n)
				i := 0
				for pb.Next() {
					i++
					for j := range reqs {
						reqs[j] = store.Request{Key: strconv.Itoa((i + j) % 10000), Limit: lim, Hits: 1}
					}
					if _, err := s.Take(b.Context(), reqs); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

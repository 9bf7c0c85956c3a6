package memstore_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

func BenchmarkTake(b *testing.B) {
	for _, a := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.TokenBucket, algorithms.SlidingLog} {
		for _, n := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/%dkeys", a, n), func(b *testing.B) {
				s := memstore.New()
				defer s.Close()
				lim := algorithms.Limit{Algorithm: a, Requests: 1 << 30, Period: time.Hour}
				if a == algorithms.SlidingLog {
					lim.Requests = 100 // the log holds one entry per admitted request
				}
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
}

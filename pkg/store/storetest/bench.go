package storetest

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Bench measures s.Take for every algorithm with batches of 1, 3 and 10
// keys (a request's descriptors), from parallel callers over 10,000 keys.
// Every store's BenchmarkTake calls it, so `make bench` compares stores on
// the same workload.
func Bench(b *testing.B, s store.Store) {
	for _, a := range algorithms.All() {
		lim := algorithms.Limit{Algorithm: a, Requests: 1 << 30, Period: time.Hour}
		if a.Info().Log {
			lim.Requests = 100 // the log holds one entry per admitted request
		}
		for _, n := range []int{1, 3, 10} {
			b.Run(fmt.Sprintf("%s/%dkeys", a, n), func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					reqs := make([]store.Request, n)
					i := 0
					for pb.Next() {
						i++
						for j := range reqs {
							reqs[j] = store.Request{Key: a.String() + strconv.Itoa((i+j)%10000), Limit: lim, Hits: 1}
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

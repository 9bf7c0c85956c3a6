package fallback_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// BenchmarkTake is what the decorator adds to a decision the backend
// answers (a memstore here, so that the backend's own cost is small and
// the difference shows): the backend alone, a request without a local
// fallback through the decorator, and a local one (the backend's answer
// kept as the counter's starting point for an outage).
func BenchmarkTake(b *testing.B) {
	mem := memstore.New()
	b.Cleanup(func() { mem.Close() })
	fb := fallback.New(mem, fallback.WithInterval(0))
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	lim := perMinute(1 << 30)
	for _, bc := range []struct {
		name string
		st   store.Store
		f    store.Fallback
	}{
		{"backend", mem, store.FallbackNone},
		{"decorator, unavailable", fb, store.FallbackNone},
		{"decorator, local", fb, store.FallbackLocal},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				reqs := []store.Request{local("", lim)}
				reqs[0].Fallback = bc.f
				i := 0
				for pb.Next() {
					reqs[0].Key = keys[i%len(keys)]
					i++
					if _, err := bc.st.Take(context.Background(), reqs); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

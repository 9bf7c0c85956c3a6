package localcache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// A random stream of batches, sent to a plain memstore and to the cache over
// another, on one clock: every decision must be identical, and the cache
// must have answered a fair share of them. The clock often lands exactly on
// the last denial's RetryAfter and one µs before it, where an entry that
// lives a µs too long would show.
func TestSameAnswersAsTheBackend(t *testing.T) {
	limits := []algorithms.Limit{
		{Algorithm: algorithms.FixedWindow, Requests: 3, Period: 2 * time.Second},
		{Algorithm: algorithms.FixedWindow, Requests: 5, Period: 3 * time.Second},
		{Algorithm: algorithms.SlidingLog, Requests: 3, Period: 2 * time.Second},
		{Algorithm: algorithms.SlidingWindow, Requests: 4, Period: 2 * time.Second},
		{Algorithm: algorithms.TokenBucket, Requests: 3, Period: 2 * time.Second, Burst: 2},
		{Algorithm: algorithms.TokenBucket, Requests: 3, Period: 2 * time.Second, RefillInterval: 500 * time.Millisecond},
		{Algorithm: algorithms.TokenBucket, Requests: 3, Period: 2 * time.Second, MaxDebt: 2},
		{Algorithm: algorithms.LeakyBucket, Requests: 3, Period: 2 * time.Second},
		{Algorithm: algorithms.GCRA, Requests: 3, Period: 2 * time.Second, Burst: 2},
	}

	for seed := range uint64(16) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x10ca1))
			clock := storetest.NewClock(storetest.Epoch())
			plain := memstore.New(memstore.WithClock(clock.Now))
			cached := localcache.New(memstore.New(memstore.WithClock(clock.Now)), 1<<20, localcache.WithClock(clock.Now))
			ctx := context.Background()
			// Each key mostly keeps one limit; now and then a "reload"
			// gives it another.
			keyLimit := map[string]algorithms.Limit{}
			var lastRetry time.Duration
			fromCache := 0
			const rounds = 6000
			for round := range rounds {
				switch p := rng.IntN(10); {
				case p < 6:
				case p < 7 && lastRetry > 0 && lastRetry != algorithms.Never:
					clock.Advance(lastRetry - time.Duration(rng.IntN(2))*time.Microsecond)
				case p < 9:
					clock.Advance(time.Duration(rng.IntN(100_000)) * time.Microsecond)
				default:
					clock.Advance(time.Duration(rng.IntN(3)) * time.Second)
				}
				batch := randomBatch(rng, keyLimit, limits)
				want, err := plain.Take(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				got, err := cached.Take(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				for i := range batch {
					if got[i].Decision != want[i].Decision {
						t.Fatalf("round %d at %s, op %d %+v: cache %+v (from cache %v), backend %+v",
							round, clock.Now().Sub(storetest.Epoch()), i, batch[i], got[i].Decision, got[i].FromCache, want[i].Decision)
					}
					if got[i].FromCache {
						fromCache++
					}
					if !want[i].Allowed {
						lastRetry = want[i].RetryAfter
					}
				}
			}
			if fromCache < rounds/20 {
				t.Fatalf("only %d of %d rounds answered from the cache: the test exercises too little", fromCache, rounds)
			}
			hits, misses, _ := cached.Stats()
			t.Logf("answered from the cache: %d ops; batches: %d hits, %d misses", fromCache, hits, misses)
		})
	}
}

// randomBatch is one to three ops on four keys, each key mostly keeping its
// limit (keyLimit) and now and then given another of limits, as a reload
// would; a batch of several mixes in shadow and quota ops.
func randomBatch(rng *rand.Rand, keyLimit map[string]algorithms.Limit, limits []algorithms.Limit) []store.Request {
	hitChoices := []uint64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 0, 7}
	modes := []algorithms.Mode{0, 0, 0, 0, 0, algorithms.Shadow, algorithms.Quota}
	size := 1
	if rng.IntN(4) == 0 {
		size += 1 + rng.IntN(2)
	}
	batch := make([]store.Request, size)
	for i := range batch {
		key := fmt.Sprint("k", rng.IntN(4))
		lim, ok := keyLimit[key]
		if !ok || rng.IntN(200) == 0 {
			lim = limits[rng.IntN(len(limits))]
			keyLimit[key] = lim
		}
		batch[i] = store.Request{Key: key, Limit: lim, Hits: hitChoices[rng.IntN(len(hitChoices))]}
		if len(batch) > 1 {
			batch[i].Mode = modes[rng.IntN(len(modes))]
		}
	}
	return batch
}

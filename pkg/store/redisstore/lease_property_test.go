package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease/leasetest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// TestLeaseProperty is issue 19's "Done when" on real Redis: three lease
// replicas, each with its own client of one redis-server (and of one
// 3-master Cluster, where a batch's two counters sit in different slots),
// never admit more than the limit, a replica killed mid-lease included,
// and admit at least 95% of it at twice the load. The scripts read the
// test's clock (WithClock), so the replay is exact. memstore's run
// (pkg/store/lease) has the full size; here each step is a round trip, so
// make test runs one "sound" run of 6 periods per algorithm and store, and
// RATELIMITD_SOAK the full size.
func TestLeaseProperty(t *testing.T) {
	scale := []leasetest.Option{leasetest.Seeds(1), leasetest.Periods(6)}
	if testkit.Soak() {
		scale = nil
	}
	t.Run("single", func(t *testing.T) {
		srv := redistest.Start(t)
		clock := storetest.NewClock(storetest.Epoch())
		leasetest.Property(t, clock, func() store.Lender {
			return persistingStore(t, redis.NewClient(&redis.Options{Addr: srv.Addr}), clock)
		}, scale...)
		// The hook did run: the counters are there, with no TTL.
		admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer admin.Close()
		key, err := admin.RandomKey(t.Context()).Result()
		if err != nil {
			t.Fatalf("no key left after the property: %v", err)
		}
		if ttl := admin.PTTL(t.Context(), key).Val(); ttl != -1 {
			t.Errorf("key %q has PTTL %v; the persist hook did not run", key, ttl)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		nodes := redistest.StartCluster(t, 3)
		clock := storetest.NewClock(storetest.Epoch())
		leasetest.Property(t, clock, func() store.Lender {
			return persistingStore(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(redistest.Addrs(nodes), ",")}), clock)
		}, scale...)
	})
}

// persistingStore is a store on c whose scripts' keys never expire in real
// time. The property steps a fake clock through 20 s of windows in about a
// second, while Redis expires keys by its own clock: a window's key written
// a millisecond before its (fake) end would vanish when the machine stalls
// for longer, and the window would start over early, an over-admission
// the test would blame on leases. Every FCALL therefore runs in MULTI with
// a PERSIST of its keys; the scripts still read expiry from the state's own
// end against the fake clock, as always.
func persistingStore(t *testing.T, c redis.UniversalClient, clock *storetest.Clock) *redisstore.Store {
	t.Helper()
	c.AddHook(persistHook{c})
	t.Cleanup(func() { _ = c.Close() })
	return newStore(t, redisstore.WithClient(c), redisstore.WithClock(clock.Now))
}

type persistHook struct{ c redis.UniversalClient }

func (persistHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (persistHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h persistHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 3 || !strings.EqualFold(cmd.Name(), "fcall") {
			return next(ctx, cmd)
		}
		n, err := strconv.Atoi(redisArg(args[2]))
		if err != nil || len(args) < 3+n {
			return next(ctx, cmd)
		}
		_, err = h.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			_ = p.Process(ctx, cmd)
			for _, k := range args[3 : 3+n] {
				p.Persist(ctx, redisArg(k))
			}
			return nil
		})
		if err != nil && cmd.Err() == nil {
			cmd.SetErr(err)
		}
		return cmd.Err()
	}
}

func redisArg(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

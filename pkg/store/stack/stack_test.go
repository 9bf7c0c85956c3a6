package stack_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/stack"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// layers walks the stack from its outermost layer down.
func layers(st store.Store) []store.Store {
	out := []store.Store{st}
	for {
		u, ok := st.(interface{ Unwrap() store.Store })
		if !ok {
			return out
		}
		st = u.Unwrap()
		out = append(out, st)
	}
}

// TestLayers: each option adds its layer in the daemon's order, and the
// fields name the layers the chain holds.
func TestLayers(t *testing.T) {
	srv := redistest.Start(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tests := []struct {
		name string
		opts []stack.Option
		// want names each layer from the outermost down.
		want []string
	}{
		{"memory", nil, []string{"memory"}},
		{"memory never leases", []stack.Option{stack.WithLease(lease.WithMaxBlock(100)), stack.WithLocalCache(1 << 10), stack.WithTracing(tp)}, []string{"traced", "cache", "memory"}},
		{"a zero-sized cache is none", []stack.Option{stack.WithLocalCache(0)}, []string{"memory"}},
		{"redis leases", []stack.Option{stack.WithRedis(redisstore.WithAddr(srv.Addr))}, []string{"lease", "redis"}},
		{"redis, cached, traced", []stack.Option{stack.WithRedis(redisstore.WithAddr(srv.Addr)), stack.WithLocalCache(1 << 10), stack.WithTracing(tp)}, []string{"traced", "cache", "lease", "redis"}},
		{"redis with a fallback", []stack.Option{stack.WithRedis(redisstore.WithAddr(srv.Addr)), stack.WithLocalCache(1 << 10), stack.WithFallback("{ratelimitd}:replicas", 0), stack.WithTracing(tp)},
			[]string{"traced", "fallback", "cache", "lease", "redis"}},
		{"memory has no outage to bridge", []stack.Option{stack.WithFallback("{ratelimitd}:replicas", 0)}, []string{"memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stk, err := stack.New(tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = stk.Close() })
			var got []string
			for _, l := range layers(stk.Store) {
				switch l {
				case store.Store(stk.Memory):
					got = append(got, "memory")
				case store.Store(stk.Redis):
					got = append(got, "redis")
				case store.Store(stk.Lease):
					got = append(got, "lease")
				case store.Store(stk.Cache):
					got = append(got, "cache")
				case store.Store(stk.Fallback):
					got = append(got, "fallback")
				default:
					got = append(got, "traced")
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("layers %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("layers %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestBadRedisOptions(t *testing.T) {
	_, err := stack.New(stack.WithRedis(redisstore.WithAddr("")))
	if err == nil {
		t.Fatal("a Redis store without an address was built")
	}
}

// replica is one daemon's stack on the shared Redis, on the test's clock.
func replica(t *testing.T, addr string, clock *storetest.Clock, tp trace.TracerProvider) *stack.Stack {
	t.Helper()
	stk, err := stack.New(
		stack.WithRedis(redisstore.WithAddr(addr), redisstore.WithClock(clock.Now)),
		stack.WithLease(lease.WithClock(clock.Now)),
		stack.WithLocalCache(1<<20, localcache.WithClock(clock.Now)),
		stack.WithTracing(tp),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stk.Close() })
	return stk
}

func take(t *testing.T, st store.Store, key string, lim algorithms.Limit, hits uint64, mode algorithms.Mode) store.Result {
	t.Helper()
	res, err := st.Take(context.Background(), []store.Request{{Key: key, Limit: lim, Hits: hits, Mode: mode}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// TestRedis: two replicas' stacks on one real Redis share its counters,
// a refund on one lifts the denial the other has cached (the stack wires
// the cache to the Redis store's refund channel: without it, the cached
// denial would last until the window ends on this frozen clock), every
// Take is a client span naming Redis, and Close closes the Redis store.
func TestRedis(t *testing.T) {
	srv := redistest.Start(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	clock := storetest.NewClock(storetest.Epoch())
	a, b := replica(t, srv.Addr, clock, tp), replica(t, srv.Addr, clock, tp)
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}

	if res := take(t, a.Store, "k", lim, 5, algorithms.Enforce); !res.Allowed {
		t.Fatalf("5 hits of 5 on A: %+v", res)
	}
	// B learns the denial from Redis, then answers it from its cache (a
	// flush when its subscription is made may drop it once: ask again).
	guard := time.Now().Add(10 * time.Second)
	for res := take(t, b.Store, "k", lim, 1, algorithms.Enforce); !res.FromCache; res = take(t, b.Store, "k", lim, 1, algorithms.Enforce) {
		if res.Allowed || time.Now().After(guard) {
			t.Fatalf("B's hit past the limit: %+v, want a denial, soon from its cache", res)
		}
	}
	if res := take(t, a.Store, "k", lim, 2, algorithms.NegativeHits); !res.Allowed || res.Remaining != 2 {
		t.Fatalf("refund of 2 on A: %+v, want 2 left", res)
	}
	guard = time.Now().Add(10 * time.Second)
	res := take(t, b.Store, "k", lim, 1, algorithms.Enforce)
	for ; !res.Allowed; res = take(t, b.Store, "k", lim, 1, algorithms.Enforce) {
		if !res.FromCache || time.Now().After(guard) {
			t.Fatalf("B after A's refund: %+v; want its cached denial until the refund reaches it, then Redis's admission", res)
		}
		time.Sleep(time.Millisecond)
	}
	if res.FromCache || res.Remaining != 1 {
		t.Fatalf("B's admission after the refund: %+v, want Redis's, 1 left", res)
	}
	if b.Cache.Invalidated() == 0 {
		t.Error("B's cache was never told of the refund")
	}

	spans := 0
	for _, s := range rec.Ended() {
		if s.Name() != "ratelimitd.store.Take" {
			continue
		}
		spans++
		attrs := attribute.NewSet(s.Attributes()...)
		if v, _ := attrs.Value("ratelimitd.backend"); v.AsString() != "redis" || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("store span: backend %q, kind %v; want a client span of redis", v.AsString(), s.SpanKind())
		}
	}
	if spans == 0 {
		t.Error("no store span recorded")
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Redis.Take(context.Background(), []store.Request{{Key: "k", Limit: lim, Hits: 1}}); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("the Redis store after the stack's Close: %v, want it closed", err)
	}
}

package daemon

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/memqueue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/redisqueue"
	"github.com/ratelimitd/ratelimitd/pkg/redisconn"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/stack"
)

// backend is everything that differs between the stores ratelimitd runs
// on (BACKEND_TYPE): how the limiter's store and the delay queue's are
// built, which settings have no effect, and how the process is tuned and
// logged for it. Each decision is a method here, so the rest of
// internal/daemon never asks which backend it is on.
type backend interface {
	// stackOptions say which store pkg/store/stack builds the limiter on,
	// with its hooks into m and log; newStore (store.go) adds what every
	// backend gets on top.
	stackOptions(m *metrics.Metrics, log *zap.Logger) ([]stack.Option, error)
	// newQueueStore builds the delay queue's store.
	newQueueStore(m *metrics.Metrics, log *zap.Logger) (queue.Store, error)
	// warnings are the settings this backend ignores, logged at start.
	warnings() []string
	// gcPercent is the GOGC to apply unless GOGC is set; 0 keeps Go's.
	gcPercent() int
	// logFields say what the start-up line tells of the backend beyond
	// its name.
	logFields() []zap.Field
	// routeLogs sends the backend's client library's own logs to log.
	routeLogs(log *zap.Logger)
}

// backend is the value deciding everything that depends on s.Backend.
func (s settings) backend() backend {
	if s.Backend == backendRedis {
		return redisBackend{set: s}
	}
	return memoryBackend{set: s}
}

// memoryBackend is the embedded store: one process, every counter in its
// heap.
type memoryBackend struct{ set settings }

// stackOptions: the stack never leases the embedded store: with every
// counter in memory already, there is nothing a lease would save.
func (b memoryBackend) stackOptions(*metrics.Metrics, *zap.Logger) ([]stack.Option, error) {
	return []stack.Option{stack.WithMemory(memstore.WithMaxKeys(b.set.MemoryMaxKeys))}, nil
}

func (memoryBackend) newQueueStore(*metrics.Metrics, *zap.Logger) (queue.Store, error) {
	return memqueue.New(), nil
}

func (b memoryBackend) warnings() []string {
	if b.set.Lease.Enabled {
		return []string{"LEASE_ENABLED=true has no effect with the embedded store (BACKEND_TYPE=memory): it is one process and never leases"}
	}
	return nil
}

// gcPercent keeps Go's default: the heap holds every key, and collecting
// it less often would let it grow by several times the keys' size.
func (memoryBackend) gcPercent() int { return 0 }

func (memoryBackend) logFields() []zap.Field { return nil }

func (memoryBackend) routeLogs(*zap.Logger) {}

// redisBackend is Redis (REDIS_URL, REDIS_TYPE, ...): the limiter and the
// delay queue each have a client of their own, built from the same
// connection settings and told apart in the breaker metrics.
type redisBackend struct{ set settings }

// stackOptions: the stack puts the lease decorator over the Redis store
// whether or not LEASE_ENABLED is set, because a rule's own lease: true
// leases too; it runs nothing until a batch leases.
func (b redisBackend) stackOptions(m *metrics.Metrics, log *zap.Logger) ([]stack.Option, error) {
	set := b.set
	opts, err := redisStoreConnection(set)
	if err != nil {
		return nil, err
	}
	noticeFailed, err := noticeFailures(m, log)
	if err != nil {
		return nil, err
	}
	breakers := redisstore.NewBreakerSet()
	if err := watchBreakers(m, "limiter", breakers.States); err != nil {
		return nil, fmt.Errorf("redis breaker metrics: %w", err)
	}
	opts = append(opts,
		redisstore.WithBreakerSet(breakers),
		redisstore.WithBreakerChange(logBreakerChange(log, "limiter")),
		redisstore.WithPipeline(set.RedisPipelineWindow, set.RedisPipelineLimit),
		redisstore.WithBatchLimit(set.RedisBatchLimit),
		redisstore.WithRoundTripObserver(m.RoundTrip),
		redisstore.WithKeyPrefix(set.CacheKeyPrefix),
		redisstore.WithNoticeFailure(noticeFailed),
		redisstore.WithUndoFailure(func(charges int, err error) {
			m.UndoFailed()
			log.Warn("cross-slot undo failed; the denied request's hits stay charged until their window passes",
				zap.Int("counters", charges), zap.Error(err))
		}),
	)
	return []stack.Option{stack.WithRedis(opts...), stack.WithLease(leaseOptions(set.Lease)...)}, nil
}

func (b redisBackend) newQueueStore(m *metrics.Metrics, log *zap.Logger) (queue.Store, error) {
	set := b.set
	conn, err := redisConnection(set)
	if err != nil {
		return nil, err
	}
	conn.Breakers, conn.OnBreakerChange = redisconn.NewBreakerSet(), logBreakerChange(log, "queue")
	if err := watchBreakers(m, "queue", conn.Breakers.States); err != nil {
		return nil, fmt.Errorf("queue redis breaker metrics: %w", err)
	}
	c, err := conn.NewClient()
	if err != nil {
		return nil, fmt.Errorf("queue redis client: %w", err)
	}
	rq, err := redisqueue.New(c, redisqueue.WithOwnedClient(), redisqueue.WithTimeout(set.RedisTimeout), redisqueue.WithPrefix(set.Queue.KeyPrefix))
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("QUEUE_KEY_PREFIX: %w", err)
	}
	return rq, nil
}

func (redisBackend) warnings() []string { return nil }

func (redisBackend) gcPercent() int { return redisGCPercent }

func (b redisBackend) logFields() []zap.Field {
	return []zap.Field{zap.String("redis", b.set.RedisType.String()+" "+b.set.RedisSocketType+" "+b.set.RedisURL)}
}

func (redisBackend) routeLogs(log *zap.Logger) { routeRedisLogs(log) }

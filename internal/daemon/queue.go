package daemon

import (
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/queuegrpc"
)

// queueSettings configure the delay queue (docs/queue.md).
type queueSettings struct {
	// Enabled is QUEUE_ENABLED: serve ratelimitd.queue.v1.DelayQueue.
	Enabled bool
	// MetricQueues is QUEUE_METRIC_QUEUES, how many queue names get their
	// own metric label; later ones share "_other".
	MetricQueues int
	// KeyPrefix is QUEUE_KEY_PREFIX, the prefix of the queue's Redis keys.
	KeyPrefix string
}

func readQueueSettings(env *envReader) queueSettings {
	return queueSettings{
		Enabled:      env.boolean("QUEUE_ENABLED", true),
		MetricQueues: env.integer("QUEUE_METRIC_QUEUES", 100, 0, 10000),
		KeyPrefix:    env.str("QUEUE_KEY_PREFIX", "ratelimitd:queue:"),
	}
}

// delayQueue is the running queue: its store and long-poll broker.
type delayQueue struct {
	store  queue.Store
	broker *queue.Broker
}

// newDelayQueue builds the queue on the same backend as the limiter
// (backend.newQueueStore): the embedded store, or its own client from the
// same Redis settings.
func newDelayQueue(set settings, m *metrics.Metrics, log *zap.Logger, srv *grpc.Server) (*delayQueue, error) {
	if !set.Queue.Enabled {
		return nil, nil
	}
	st, err := set.backend().newQueueStore(m, log)
	if err != nil {
		return nil, err
	}
	var opts []queue.BrokerOption
	if set.Queue.MetricQueues > 0 {
		qm := queue.NewMetrics(st, set.Queue.MetricQueues, 2*time.Second)
		if err := m.Registry().Register(qm); err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("queue metrics: %w", err)
		}
		opts = append(opts, queue.WithMetrics(qm))
	}
	b := queue.NewBroker(st, opts...)
	queuev1.RegisterDelayQueueServer(srv, queuegrpc.New(b))
	return &delayQueue{store: st, broker: b}, nil
}

// shutdown ends long polls so a graceful stop need not wait them out.
func (q *delayQueue) shutdown() {
	if q != nil {
		q.broker.Shutdown()
	}
}

func (q *delayQueue) close() error {
	if q == nil {
		return nil
	}
	if err := q.store.Close(); err != nil {
		return fmt.Errorf("closing queue store: %w", err)
	}
	return nil
}

package memqueue_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/queue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/memqueue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/queuetest"
)

func TestConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, clock *queuetest.Clock) queue.Queue {
		st := memqueue.New(memqueue.WithClock(clock.Now))
		t.Cleanup(func() { _ = st.Close() })
		return queue.NewBroker(clock.Watch(st, false))
	})
}

package redisqueue

import (
	"context"
	_ "embed"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

// Notify implements queue.Store. The first call subscribes to the channel;
// a (re)subscription is passed on as a notification for every queue
// (Queue == ""), since messages published while disconnected are lost.
func (s *Store) Notify(fn func(queue.Notification)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify = append(s.notify, fn)
	if s.sub != nil {
		return
	}
	s.sub = s.client.Subscribe(context.Background(), s.channel)
	s.done = make(chan struct{})
	go s.listen(s.sub.ChannelWithSubscriptions(), s.done)
}

func (s *Store) listen(ch <-chan any, done chan struct{}) {
	defer close(done)
	for m := range ch {
		var n queue.Notification
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
		case *redis.Message:
			name, rest, ok := strings.Cut(m.Payload, "|")
			due, now, ok2 := strings.Cut(rest, "|")
			if !ok || !ok2 {
				continue
			}
			n = queue.Notification{Queue: name, Due: time.UnixMilli(ms(due)), Now: time.UnixMilli(ms(now))}
		default:
			continue
		}
		s.mu.Lock()
		fns := s.notify
		s.mu.Unlock()
		for _, fn := range fns {
			fn(n)
		}
	}
}

package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// RefundChannel is where the take script publishes the key of a counter a
// refund (algorithms.NegativeHits) gave room back to when it had none
// left: the only refunds that can lift a denial a replica's local cache
// holds (pkg/store/localcache caches denials of counters with nothing
// left only).
const RefundChannel = "ratelimitd:refunds"

// refundPing is how often an idle subscription is checked: a connection
// that died quietly is found and replaced within about twice this.
const refundPing = time.Second

// WatchRefunds follows RefundChannel until ctx ends: drop gets the key of
// each message, and flush is called whenever the subscription is
// established, first and after every reconnection, since messages
// published while it was down are lost (Redis pub/sub delivers at most
// once). On a Cluster, Redis forwards every message to every node, so one
// subscription to any node hears them all. It returns ctx's error.
func (s *Store) WatchRefunds(ctx context.Context, drop func(keys ...string), flush func()) error {
	ps := s.client.Subscribe(ctx, RefundChannel)
	defer func() { _ = ps.Close() }()
	// Closing the subscription ends a receive at once when ctx ends.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	for {
		msg, err := ps.ReceiveTimeout(ctx, refundPing)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var timeout interface{ Timeout() bool }
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				flush()
			}
		case *redis.Message:
			drop(m.Payload)
		case nil:
			if errors.As(err, &timeout) && timeout.Timeout() {
				// Idle: a PING's answer proves the connection; a failed
				// one makes the next receive reconnect and resubscribe.
				_ = ps.Ping(ctx)
				continue
			}
			// go-redis reconnects on the next receive; pace the retries
			// while Redis is down.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(refundPing / 10):
			}
		}
	}
}

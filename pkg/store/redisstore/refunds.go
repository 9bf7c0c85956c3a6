package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// refundChannel is the name of the notices' channel after CACHE_KEY_PREFIX.
const refundChannel = "ratelimitd:refunds"

// RefundChannel is the channel of the notices of a deployment whose keys
// start with prefix (CACHE_KEY_PREFIX; WithKeyPrefix): the key of every
// counter that may have room again after a replica's local cache learned it
// had none (pkg/store/localcache caches denials of counters with nothing
// left only). The store publishes a refund that gave room back to a counter
// with none left, the counters a Cluster undo or a Return gave hits back
// to, and the counters Reset deleted. Deployments sharing a Redis under
// different prefixes hear only their own.
func RefundChannel(prefix string) string { return prefix + refundChannel }

// refundPing is how often an idle subscription is checked: a connection
// that died quietly is found and replaced within about twice this.
const refundPing = time.Second

// WithKeyPrefix is CACHE_KEY_PREFIX, which the notices' channel starts with
// (RefundChannel). The keys themselves are the caller's, prefix included.
func WithKeyPrefix(prefix string) Option {
	return func(s *settings) { s.channel = RefundChannel(prefix) }
}

// WithNoticeFailure is told when a notice could not be published (op
// "publish": the change it announces is made all the same) or the
// subscription WatchRefunds holds failed (op "subscribe": it is made
// again). For a rate-limited log and a metric: either way another
// replica may answer a lifted denial from its cache until
// LOCAL_CACHE_MAX_AGE.
func WithNoticeFailure(fn func(op string, err error)) Option {
	return func(s *settings) { s.noticeFailed = fn }
}

func (s *Store) noticeFailure(op string, err error) {
	if s.noticeFailed != nil {
		s.noticeFailed(op, err)
	}
}

var _ store.RefundWatcher = (*Store)(nil)

// WatchRefunds follows the notices' channel (RefundChannel) until ctx
// ends: drop gets the key of each message, and flush is called whenever
// the subscription is established, first and after every reconnection,
// since messages published while it was down are lost (Redis pub/sub
// delivers at most once). A failed receive or ping is reported
// (WithNoticeFailure) and the subscription made again. On a Cluster, Redis
// forwards every message to every node, so one subscription to any node
// hears them all. It returns ctx's error.
func (s *Store) WatchRefunds(ctx context.Context, drop func(keys ...string), flush func()) error {
	ps := s.client.Subscribe(ctx, s.channel)
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
				if err := ps.Ping(ctx); err != nil && ctx.Err() == nil {
					s.noticeFailure("subscribe", err)
				}
				continue
			}
			s.noticeFailure("subscribe", err)
			// go-redis reconnects on the next receive after a broken
			// connection (pace the retries while Redis is down), but a
			// SUBSCRIBE the server refused (an ACL without the channel)
			// leaves the connection up and unsubscribed: ask again.
			var refused redis.Error
			wait := refundPing / 10
			if errors.As(err, &refused) {
				wait = refundPing
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			if refused != nil {
				_ = ps.Subscribe(ctx, s.channel)
			}
		}
	}
}

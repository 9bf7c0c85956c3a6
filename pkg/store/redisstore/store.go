// Package redisstore is the store.Store shared by every replica: each Take
// is one FCALL of internal/scripts' Lua library (EVALSHA where Redis refuses
// FUNCTION), so a batch is decided atomically in
// Redis, on Redis's clock, in one round trip. On Redis Cluster a batch whose
// keys span slots is one call per slot group, run concurrently, with an
// exact undo of what the other groups charged when the batch is denied.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lender = (*Store)(nil)
)

// Store decides rate limits in Redis.
type Store struct {
	client     redis.UniversalClient
	ownsClient bool
	runner     *scripts.Runner
	timeout    time.Duration
	now        func() time.Time
	observe    func(time.Duration, error)
	// stopCoalescing stops the pipelines' window timers (coalesce);
	// stopBreakers the breakers' probes (pkg/redisconn).
	stopCoalescing func()
	stopBreakers   func()
	undoFailed     func(charges int, err error)
	// lateUndos are the undos still running after their request failed
	// (spread.go); Close waits for them before closing the client.
	lateUndos sync.WaitGroup
	// spread: keys may live in several Cluster slots (a cluster client).
	spread  bool
	refresh *refresher
	closed  atomic.Bool
	// The notices (refunds.go, notices.go): their channel, what is told
	// of a failed one, and their publisher, which Close stops.
	channel      string
	noticeFailed func(op string, err error)
	notices      *notices

	closeOnce sync.Once
	closeErr  error
}

// New builds a Store. It does not contact Redis, so a replica starts while
// Redis is still coming up; until Redis answers, Take fails (the service
// answers UNAVAILABLE). Ping tells whether Redis answers now; nothing in
// ratelimitd calls it yet (readiness does not depend on the backend).
func New(opts ...Option) (*Store, error) {
	s := defaults()
	for _, opt := range opts {
		opt(&s)
	}
	if s.conn.Timeout <= 0 {
		return nil, fmt.Errorf("redisstore: timeout must be positive, got %s", s.conn.Timeout)
	}
	st := &Store{client: s.client, timeout: s.conn.Timeout, now: s.now, observe: s.observe, undoFailed: s.undoFailed,
		channel: s.channel, noticeFailed: s.noticeFailed}
	if st.client == nil {
		// The breakers come with the client, as its first hooks: an open one
		// must answer before a call queues.
		c, stopBreakers, err := s.conn.Open()
		if err != nil {
			return nil, err
		}
		st.client, st.ownsClient = c, true
		st.stopBreakers = stopBreakers
		st.stopCoalescing = coalesce(c, s)
	}
	_, st.spread = st.client.(*redis.ClusterClient)
	st.refresh = newRefresher(st.client, s.refreshInterval)
	st.notices = newNotices(st.client, st.channel, st.timeout, st.noticeFailure)
	st.runner = scripts.NewRunner(scripts.WithLiftedRefunds(st.notices.add))
	return st, nil
}

// Take decides reqs all-or-nothing: one script call when their keys share a
// Cluster slot (always on Single and Sentinel), else one per slot group plus
// an undo when denied. An error means Redis could not decide (unreachable,
// timed out, script error); it is never "over limit". Errors that certainly
// ran nothing are retried within ctx; see retry.go.
func (s *Store) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	results, _, err := s.take(ctx, reqs, false)
	return results, err
}

// TakeCharged is Take, also returning what an admitted batch charged each
// key (the take script's charges, scripts.Charge), for pkg/store/lease to
// give unused hits back with Return. It is the same single call per slot
// group, through the same coalescer as Take: in a pipeline it merges with
// the other takes of its now and slot (merge.go), and asking for charges
// only lengthens its own reply.
func (s *Store) TakeCharged(ctx context.Context, reqs []store.Request) ([]store.Result, []store.Charge, error) {
	return s.take(ctx, reqs, true)
}

func (s *Store) take(ctx context.Context, reqs []store.Request, withCharges bool) ([]store.Result, []store.Charge, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("redisstore: %w", err)
	}
	if len(reqs) == 0 {
		return []store.Result{}, nil, nil
	}
	// REDIS_TIMEOUT caps the call even when the caller allows longer. Envoy
	// always sends a shorter deadline, so most calls need no timer of ours.
	if deadline, ok := ctx.Deadline(); !ok || time.Until(deadline) > s.timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	var now time.Time
	if s.now != nil {
		now = s.now()
	}
	start := time.Now()
	var out scripts.Outcome
	var err error
	if groups := s.slotGroups(reqs); groups != nil {
		out, err = s.takeSpread(ctx, reqs, groups, now, withCharges)
	} else {
		err = s.do(ctx, func(ctx context.Context) error {
			var err error
			if withCharges {
				out, err = s.runner.TakeCharged(ctx, s.client, store.Ops(reqs), now)
			} else {
				out, err = s.runner.Take(ctx, s.client, store.Ops(reqs), now)
			}
			return err
		})
	}
	if s.observe != nil {
		s.observe(time.Since(start), err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: %w", err)
	}
	if len(out.Decisions) != len(reqs) || len(out.Applied) != len(reqs) {
		return nil, nil, fmt.Errorf("redisstore: script returned %d decisions for %d keys", len(out.Decisions), len(reqs))
	}
	results := make([]store.Result, len(reqs))
	for i, d := range out.Decisions {
		results[i] = store.Result{Decision: d, Applied: out.Applied[i]}
	}
	if !withCharges {
		return results, nil, nil
	}
	return results, out.Charges, nil
}

// Ping reports whether Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}

// Close closes the client New built; a client from WithClient stays open.
// Closing twice is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stopCoalescing != nil {
			s.stopCoalescing()
		}
		if s.stopBreakers != nil {
			s.stopBreakers()
		}
		s.lateUndos.Wait()
		s.notices.stop()
		s.closed.Store(true)
		if s.ownsClient {
			if err := s.client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
				s.closeErr = fmt.Errorf("redisstore: close: %w", err)
			}
		}
	})
	return s.closeErr
}

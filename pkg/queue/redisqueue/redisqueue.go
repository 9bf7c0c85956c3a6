// Package redisqueue is the queue.Store shared by every replica: each
// operation is one Lua script over three keys in the queue's Cluster slot (a
// sorted set of waiting messages scored by due time, one of in-flight
// messages scored by visibility deadline, a hash of bodies, attempts and
// receipts), on Redis's clock. New heads are published on one channel so
// that long polls in every replica wake without polling.
package redisqueue

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

var _ queue.Store = (*Store)(nil)

var (
	// commonSrc's helpers open every script.
	//go:embed lua/common.lua
	commonSrc string
	//go:embed lua/enqueue.lua
	enqueueSrc string
	//go:embed lua/claim.lua
	claimSrc string
	//go:embed lua/settle.lua
	settleSrc string
	//go:embed lua/stats.lua
	statsSrc string

	enqueueScript = redis.NewScript(commonSrc + enqueueSrc)
	claimScript   = redis.NewScript(commonSrc + claimSrc)
	settleScript  = redis.NewScript(commonSrc + settleSrc)
	statsScript   = redis.NewScript(commonSrc + statsSrc)
)

// DefaultRetention is how long a queue's keys outlive their last write
// beyond the longest delay and visibility a message can have.
const DefaultRetention = 4 * 24 * time.Hour

// Store is a delay queue in Redis.
type Store struct {
	client    redis.UniversalClient
	owns      bool
	prefix    string
	channel   string
	timeout   time.Duration
	ttl       time.Duration
	now       func() time.Time
	nonce     string
	closeOnce sync.Once

	mu     sync.Mutex
	notify []func(queue.Notification)
	sub    *redis.PubSub
	done   chan struct{}
}

// Option configures New.
type Option func(*Store)

// WithPrefix prefixes every key and the notification channel (default
// "ratelimitd:queue:"); it must not contain braces, which would move the
// Cluster hash tag.
func WithPrefix(p string) Option { return func(s *Store) { s.prefix = p } }

// WithTimeout bounds every call whatever the caller's deadline (REDIS_TIMEOUT).
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithRetention sets how long idle queue keys live; see DefaultRetention.
func WithRetention(d time.Duration) Option {
	return func(s *Store) { s.ttl = queue.MaxDelay + queue.MaxVisibility + d }
}

// WithClock passes now() to the scripts instead of Redis TIME. Tests only:
// replicas must share Redis's clock.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithOwnedClient makes Close close the client too.
func WithOwnedClient() Option { return func(s *Store) { s.owns = true } }

// New returns a Store on client. It does not contact Redis.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	s := &Store{
		client: client, prefix: "ratelimitd:queue:", timeout: 10 * time.Second,
		ttl: queue.MaxDelay + queue.MaxVisibility + DefaultRetention, nonce: queue.NewID()[:12],
	}
	for _, o := range opts {
		o(s)
	}
	if strings.ContainsAny(s.prefix, "{}") {
		return nil, fmt.Errorf("redisqueue: key prefix %q must not contain braces", s.prefix)
	}
	if s.timeout <= 0 {
		return nil, fmt.Errorf("redisqueue: timeout must be positive, got %s", s.timeout)
	}
	s.channel = s.prefix + "notify"
	return s, nil
}

// keys are the queue's three keys; the hash tag puts them in one slot.
func (s *Store) keys(name string) []string {
	base := s.prefix + "{" + name + "}:"
	return []string{base + "due", base + "inflight", base + "data"}
}

func (s *Store) nowArg() int64 {
	if s.now == nil {
		return 0
	}
	return s.now().UnixMilli()
}

func (s *Store) run(ctx context.Context, what string, sc *redis.Script, keys []string, args ...any) ([]any, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	v, err := sc.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisqueue: %s: %w", what, err)
	}
	return v, nil
}

// ms reads a script's integer reply or a sorted-set score (a string).
func ms(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			f, _ := strconv.ParseFloat(x, 64)
			return int64(f)
		}
		return n
	}
	return 0
}

// Enqueue implements queue.Store.
func (s *Store) Enqueue(ctx context.Context, req queue.EnqueueRequest) (queue.EnqueueResult, error) {
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	if err := queue.ValidateEnqueue(req, now); err != nil {
		return queue.EnqueueResult{}, err
	}
	if req.ID == "" {
		req.ID = queue.NewID()
	}
	at := int64(-1)
	if !req.DeliverAt.IsZero() {
		at = req.DeliverAt.UnixMilli()
	}
	v, err := s.run(ctx, "enqueue", enqueueScript, s.keys(req.Queue),
		s.nowArg(), req.ID, req.Payload, req.Delay.Milliseconds(), at, s.ttl.Milliseconds(), s.channel, req.Queue)
	if err != nil {
		return queue.EnqueueResult{}, err
	}
	return queue.EnqueueResult{ID: req.ID, DeliverAt: time.UnixMilli(ms(v[1])), Duplicate: ms(v[0]) == 1}, nil
}

// Claim implements queue.Store.
func (s *Store) Claim(ctx context.Context, req queue.ClaimRequest) (queue.ClaimResult, error) {
	vis, err := queue.ValidateClaim(req)
	if err != nil {
		return queue.ClaimResult{}, err
	}
	v, err := s.run(ctx, "claim", claimScript, s.keys(req.Queue),
		s.nowArg(), req.Max, vis.Milliseconds(), s.nonce, s.ttl.Milliseconds())
	if err != nil {
		return queue.ClaimResult{}, err
	}
	if len(v) != 4 {
		return queue.ClaimResult{}, fmt.Errorf("redisqueue: claim: unexpected reply %v", v)
	}
	res := queue.ClaimResult{Now: time.UnixMilli(ms(v[0]))}
	deadline := time.UnixMilli(ms(v[1]))
	if next := ms(v[2]); next >= 0 {
		res.NextDue = time.UnixMilli(next)
	}
	rows, _ := v[3].([]any)
	for _, r := range rows {
		f, ok := r.([]any)
		if !ok || len(f) != 5 {
			return queue.ClaimResult{}, fmt.Errorf("redisqueue: claim: unexpected message %v", r)
		}
		id, _ := f[0].(string)
		body, _ := f[1].(string)
		receipt, _ := f[4].(string)
		res.Messages = append(res.Messages, queue.Message{
			ID: id, Payload: []byte(body), DeliverAt: time.UnixMilli(ms(f[2])),
			Attempt: uint32(ms(f[3])), Receipt: receipt, VisibleAt: deadline,
		})
	}
	return res, nil
}

func (s *Store) settle(ctx context.Context, op, name, id, receipt string, d time.Duration) (time.Time, error) {
	v, err := s.run(ctx, op, settleScript, s.keys(name),
		s.nowArg(), op, id, receipt, d.Milliseconds(), s.ttl.Milliseconds(), s.channel, name)
	if err != nil {
		return time.Time{}, err
	}
	if len(v) != 3 {
		return time.Time{}, fmt.Errorf("redisqueue: %s: unexpected reply %v", op, v)
	}
	if ms(v[0]) != 1 {
		return time.Time{}, queue.ErrReceipt
	}
	return time.UnixMilli(ms(v[1])), nil
}

// Ack implements queue.Store.
func (s *Store) Ack(ctx context.Context, name, id, receipt string) error {
	if err := queue.ValidateReceipt(name, id, receipt); err != nil {
		return err
	}
	_, err := s.settle(ctx, "ack", name, id, receipt, 0)
	return err
}

// Nack implements queue.Store.
func (s *Store) Nack(ctx context.Context, name, id, receipt string, delay time.Duration) (time.Time, error) {
	if err := queue.ValidateNack(name, id, receipt, delay); err != nil {
		return time.Time{}, err
	}
	return s.settle(ctx, "nack", name, id, receipt, delay)
}

// Extend implements queue.Store.
func (s *Store) Extend(ctx context.Context, name, id, receipt string, visibility time.Duration) (time.Time, error) {
	if err := queue.ValidateExtend(name, id, receipt, visibility); err != nil {
		return time.Time{}, err
	}
	return s.settle(ctx, "extend", name, id, receipt, visibility)
}

// Stats implements queue.Store.
func (s *Store) Stats(ctx context.Context, name string) (queue.Stats, error) {
	if err := queue.ValidQueue(name); err != nil {
		return queue.Stats{}, err
	}
	v, err := s.run(ctx, "stats", statsScript, s.keys(name)[:2], s.nowArg())
	if err != nil {
		return queue.Stats{}, err
	}
	if len(v) != 4 {
		return queue.Stats{}, fmt.Errorf("redisqueue: stats: unexpected reply %v", v)
	}
	st := queue.Stats{Depth: ms(v[0]), InFlight: ms(v[1])}
	if head, now := ms(v[2]), ms(v[3]); head >= 0 && head < now {
		st.OldestDueLag = time.Duration(now-head) * time.Millisecond
	}
	return st, nil
}

// Close stops the subscription, and closes the client when owned.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		sub, done := s.sub, s.done
		s.mu.Unlock()
		if sub != nil {
			err = sub.Close()
			<-done
		}
		if s.owns {
			err = errors.Join(err, s.client.Close())
		}
	})
	return err
}

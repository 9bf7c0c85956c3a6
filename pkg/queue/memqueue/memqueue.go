// Package memqueue is the embedded queue.Store: the same semantics as
// redisqueue, held in this process (nothing is shared between replicas and
// nothing survives a restart).
package memqueue

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

var _ queue.Store = (*Store)(nil)

// Store holds every queue in memory, times in milliseconds like redisqueue.
type Store struct {
	now func() time.Time

	mu     sync.Mutex
	queues map[string]*state
	seq    uint64
	nonce  string
	notify []func(queue.Notification)
}

type state struct {
	msgs map[string]*msg
}

type msg struct {
	payload  []byte
	due      int64 // ms; while in flight, the visibility deadline
	inFlight bool
	attempt  uint32
	receipt  string
}

// Option configures New.
type Option func(*Store)

// WithClock makes the store read time from now (tests step a fake clock).
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, queues: map[string]*state{}, nonce: queue.NewID()[:12]}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *Store) nowMs() int64 { return s.now().UnixMilli() }

func (s *Store) get(name string) *state {
	q := s.queues[name]
	if q == nil {
		q = &state{msgs: map[string]*msg{}}
		s.queues[name] = q
	}
	return q
}

// head is the earliest due time or visibility deadline in q, -1 if empty.
func (q *state) head() int64 {
	h := int64(-1)
	for _, m := range q.msgs {
		if h < 0 || m.due < h {
			h = m.due
		}
	}
	return h
}

// Enqueue implements queue.Store.
func (s *Store) Enqueue(ctx context.Context, req queue.EnqueueRequest) (queue.EnqueueResult, error) {
	if err := ctx.Err(); err != nil {
		return queue.EnqueueResult{}, fmt.Errorf("memqueue: enqueue: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMs()
	if err := queue.ValidateEnqueue(req, time.UnixMilli(now)); err != nil {
		return queue.EnqueueResult{}, err
	}
	if req.ID == "" {
		req.ID = queue.NewID()
	}
	q := s.get(req.Queue)
	if m, ok := q.msgs[req.ID]; ok {
		return queue.EnqueueResult{ID: req.ID, DeliverAt: time.UnixMilli(m.due), Duplicate: true}, nil
	}
	due := now + req.Delay.Milliseconds()
	if !req.DeliverAt.IsZero() {
		due = max(req.DeliverAt.UnixMilli(), now)
	}
	head := q.head()
	q.msgs[req.ID] = &msg{payload: append([]byte(nil), req.Payload...), due: due}
	if head < 0 || due < head {
		s.publish(req.Queue, due, now)
	}
	return queue.EnqueueResult{ID: req.ID, DeliverAt: time.UnixMilli(due)}, nil
}

func (s *Store) publish(name string, due, now int64) {
	n := queue.Notification{Queue: name, Due: time.UnixMilli(due), Now: time.UnixMilli(now)}
	for _, fn := range s.notify {
		fn(n)
	}
}

// Claim implements queue.Store.
func (s *Store) Claim(ctx context.Context, req queue.ClaimRequest) (queue.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return queue.ClaimResult{}, fmt.Errorf("memqueue: claim: %w", err)
	}
	vis, err := queue.ValidateClaim(req)
	if err != nil {
		return queue.ClaimResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowMs()
	q := s.get(req.Queue)
	type cand struct {
		id  string
		due int64
	}
	var due []cand
	for id, m := range q.msgs {
		if m.due <= now {
			due = append(due, cand{id, m.due})
		}
	}
	// Oldest due first, ties by id: the order of redisqueue's sorted set.
	sort.Slice(due, func(i, j int) bool {
		if due[i].due != due[j].due {
			return due[i].due < due[j].due
		}
		return due[i].id < due[j].id
	})
	if len(due) > req.Max {
		due = due[:req.Max]
	}
	res := queue.ClaimResult{Now: time.UnixMilli(now)}
	deadline := now + vis.Milliseconds()
	for _, c := range due {
		m := q.msgs[c.id]
		s.seq++
		m.attempt++
		m.inFlight = true
		m.receipt = fmt.Sprintf("%s-%d", s.nonce, s.seq)
		m.due = deadline
		res.Messages = append(res.Messages, queue.Message{
			ID: c.id, Payload: append([]byte(nil), m.payload...), DeliverAt: time.UnixMilli(c.due),
			Attempt: m.attempt, Receipt: m.receipt, VisibleAt: time.UnixMilli(deadline),
		})
	}
	if h := q.head(); h >= 0 {
		res.NextDue = time.UnixMilli(h)
	} else {
		delete(s.queues, req.Queue)
	}
	return res, nil
}

// claimed returns the message receipt's claim holds, or ErrReceipt. A
// receipt holds until the message is claimed again, nacked or acked, so an
// ack just after the deadline still counts if nobody claimed it since.
func (s *Store) claimed(name, id, receipt string) (*state, *msg, error) {
	q := s.queues[name]
	if q == nil {
		return nil, nil, queue.ErrReceipt
	}
	m := q.msgs[id]
	if m == nil || m.receipt == "" || m.receipt != receipt {
		return nil, nil, queue.ErrReceipt
	}
	return q, m, nil
}

// Ack implements queue.Store.
func (s *Store) Ack(ctx context.Context, name, id, receipt string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memqueue: ack: %w", err)
	}
	if err := queue.ValidateReceipt(name, id, receipt); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, _, err := s.claimed(name, id, receipt)
	if err != nil {
		return err
	}
	delete(q.msgs, id)
	if len(q.msgs) == 0 {
		delete(s.queues, name)
	}
	return nil
}

// Nack implements queue.Store.
func (s *Store) Nack(ctx context.Context, name, id, receipt string, delay time.Duration) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, fmt.Errorf("memqueue: nack: %w", err)
	}
	if err := queue.ValidateNack(name, id, receipt, delay); err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, m, err := s.claimed(name, id, receipt)
	if err != nil {
		return time.Time{}, err
	}
	now := s.nowMs()
	// The nacked message's own deadline no longer counts as a head.
	delete(q.msgs, id)
	head := q.head()
	q.msgs[id] = m
	due := now + delay.Milliseconds()
	m.inFlight, m.receipt, m.due = false, "", due
	if head < 0 || due < head {
		s.publish(name, due, now)
	}
	return time.UnixMilli(due), nil
}

// Extend implements queue.Store.
func (s *Store) Extend(ctx context.Context, name, id, receipt string, visibility time.Duration) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, fmt.Errorf("memqueue: extend: %w", err)
	}
	if err := queue.ValidateExtend(name, id, receipt, visibility); err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, m, err := s.claimed(name, id, receipt)
	if err != nil {
		return time.Time{}, err
	}
	m.due = s.nowMs() + visibility.Milliseconds()
	return time.UnixMilli(m.due), nil
}

// Stats implements queue.Store.
func (s *Store) Stats(ctx context.Context, name string) (queue.Stats, error) {
	if err := ctx.Err(); err != nil {
		return queue.Stats{}, fmt.Errorf("memqueue: stats: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var st queue.Stats
	q := s.queues[name]
	if q == nil {
		return st, nil
	}
	now := s.nowMs()
	oldest := now
	for _, m := range q.msgs {
		if m.inFlight {
			st.InFlight++
		} else {
			st.Depth++
		}
		if m.due < oldest {
			oldest = m.due
		}
	}
	st.OldestDueLag = time.Duration(now-oldest) * time.Millisecond
	return st, nil
}

// Notify implements queue.Store; fn runs under the store's lock.
func (s *Store) Notify(fn func(queue.Notification)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify = append(s.notify, fn)
}

// Close implements queue.Store.
func (s *Store) Close() error { return nil }

package queue

import (
	"context"
	"fmt"
	"sync"
	"time"
)

var _ Queue = (*Broker)(nil)

// Broker serves a Store with long polls. Each replica keeps, per queue, the
// callers waiting in Claim and one timer for the earliest due time it knows
// of; the timer, the store's notification of a new head (from any replica)
// and a claim that left more messages due each wake one waiter, which runs
// one claim. Nothing polls the store while a queue is idle.
type Broker struct {
	store   Store
	metrics *Metrics

	mu     sync.Mutex
	queues map[string]*waitQueue

	stopOnce sync.Once
	stopped  chan struct{}
}

type waitQueue struct {
	waiters []*waiter
	timer   *time.Timer
	wakeAt  time.Time
	// gen counts wake-ups; idleAt is the gen at which a claim found nothing
	// due. While gen == idleAt (no notification, timer or hand-over since)
	// the queue is known to have nothing due before the timer, so a caller
	// joining the wait need not ask the store: an idle queue costs one
	// claim per replica, not one per long poll.
	gen, idleAt uint64
	idle        bool
	// claiming counts waiters' claims in flight, the latest begun at
	// claimGen: a caller joining meanwhile learns the same from its result
	// (nothing due, or a hand-over when more is due) and need not claim too.
	claiming int
	claimGen uint64
}

type waiter struct{ kick chan struct{} }

// BrokerOption configures NewBroker.
type BrokerOption func(*Broker)

// WithMetrics counts the broker's queues in m.
func WithMetrics(m *Metrics) BrokerOption { return func(b *Broker) { b.metrics = m } }

// NewBroker serves st; it registers for st's notifications.
func NewBroker(st Store, opts ...BrokerOption) *Broker {
	b := &Broker{store: st, queues: map[string]*waitQueue{}, stopped: make(chan struct{})}
	for _, o := range opts {
		o(b)
	}
	st.Notify(b.onNotify)
	return b
}

// Enqueue implements Queue.
func (b *Broker) Enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error) {
	res, err := b.store.Enqueue(ctx, req)
	if err == nil {
		b.metrics.seen(req.Queue)
	}
	return res, err
}

// Ack implements Queue.
func (b *Broker) Ack(ctx context.Context, queue, id, receipt string) error {
	return b.store.Ack(ctx, queue, id, receipt)
}

// Nack implements Queue.
func (b *Broker) Nack(ctx context.Context, queue, id, receipt string, delay time.Duration) (time.Time, error) {
	return b.store.Nack(ctx, queue, id, receipt, delay)
}

// Extend implements Queue.
func (b *Broker) Extend(ctx context.Context, queue, id, receipt string, visibility time.Duration) (time.Time, error) {
	return b.store.Extend(ctx, queue, id, receipt, visibility)
}

// Claim implements Queue: with Wait > 0 and nothing due it blocks until a
// message is due, Wait passes (no messages, no error) or ctx ends.
func (b *Broker) Claim(ctx context.Context, req ClaimRequest) ([]Message, error) {
	if _, err := ValidateClaim(req); err != nil {
		return nil, err
	}
	if req.Wait == 0 {
		res, err := b.claim(ctx, req)
		return res.Messages, err
	}
	w := &waiter{kick: make(chan struct{}, 1)}
	known := b.register(req.Queue, w)
	defer b.unregister(req.Queue, w)
	expired := time.NewTimer(req.Wait)
	defer expired.Stop()
	for {
		if !known {
			gen := b.beginClaim(req.Queue)
			res, err := b.claim(ctx, req)
			b.endClaim(req.Queue, gen, err == nil && len(res.Messages) == 0, err != nil)
			if err != nil {
				return nil, err
			}
			if len(res.Messages) > 0 {
				return res.Messages, nil
			}
		}
		known = false
		select {
		case <-w.kick:
		case <-expired.C:
			return nil, nil
		case <-b.stopped:
			// Shutting down: answer like an expired wait so that a graceful
			// stop does not wait out every long poll.
			return nil, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("queue: claim: %w", ctx.Err())
		}
	}
}

// Shutdown makes every current and future long poll return at once with no
// messages; the store stays usable (claims without wait still work).
func (b *Broker) Shutdown() {
	b.stopOnce.Do(func() { close(b.stopped) })
}

// claim runs one store claim and schedules what it learnt: another waiter
// when more messages are due, the queue's timer for the next due time.
func (b *Broker) claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	res, err := b.store.Claim(ctx, req)
	if err != nil {
		return res, err
	}
	b.metrics.claimed(req.Queue, res.Messages)
	if !res.NextDue.IsZero() {
		b.wakeIn(req.Queue, res.NextDue.Sub(res.Now), len(res.Messages) > 0)
	}
	return res, nil
}

// register adds w to name's waiters and reports whether the queue is known
// to have nothing due (see waitQueue.idle).
func (b *Broker) register(name string, w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[name]
	if q == nil {
		q = &waitQueue{}
		b.queues[name] = q
	}
	q.waiters = append(q.waiters, w)
	return (q.idle && q.idleAt == q.gen) || (q.claiming > 0 && q.claimGen == q.gen)
}

// beginClaim records a waiter's claim in flight and returns the generation.
func (b *Broker) beginClaim(name string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[name]
	q.claiming++
	q.claimGen = q.gen
	return q.gen
}

// endClaim records that a claim begun at generation gen found nothing due
// (empty) unless something woke the queue meanwhile; a failed claim hands
// over to another waiter, which may have joined relying on it.
func (b *Broker) endClaim(name string, gen uint64, empty, failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[name]
	q.claiming--
	switch {
	case failed:
		q.kickOne()
	case empty && q.gen == gen:
		q.idle, q.idleAt = true, gen
	}
}

// unregister removes w, handing a wake-up it did not use to another waiter.
func (b *Broker) unregister(name string, w *waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[name]
	if q == nil {
		return
	}
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	select {
	case <-w.kick:
		q.kickOne()
	default:
	}
	if len(q.waiters) == 0 {
		if q.timer != nil {
			q.timer.Stop()
		}
		delete(b.queues, name)
	}
}

// kickOne wakes the longest-waiting waiter not already woken.
func (q *waitQueue) kickOne() {
	q.gen++
	q.idle = false
	for _, w := range q.waiters {
		select {
		case w.kick <- struct{}{}:
			return
		default:
		}
	}
}

// wakeIn wakes a waiter of name after d (at once when d <= 0 and
// immediate), keeping one timer per queue for the earliest time.
func (b *Broker) wakeIn(name string, d time.Duration, immediate bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[name]
	if q == nil || len(q.waiters) == 0 {
		return
	}
	if d <= 0 {
		if immediate {
			q.kickOne()
			return
		}
		// A caller that found nothing yet sees a due head: it raced a
		// claim elsewhere; retry on the timer rather than spin.
		d = time.Millisecond
	}
	at := time.Now().Add(d)
	if q.timer != nil && !at.Before(q.wakeAt) {
		return
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	q.wakeAt = at
	q.timer = time.AfterFunc(d, func() { b.fire(name, q) })
}

func (b *Broker) fire(name string, q *waitQueue) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queues[name] != q {
		return
	}
	q.timer, q.wakeAt = nil, time.Time{}
	q.kickOne()
}

func (b *Broker) onNotify(n Notification) {
	if n.Queue == "" {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, q := range b.queues {
			q.kickOne()
		}
		return
	}
	b.wakeIn(n.Queue, n.Due.Sub(n.Now), true)
}

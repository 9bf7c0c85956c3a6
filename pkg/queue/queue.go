// Package queue is a delay queue: messages become claimable at their due
// time, a claim hides a message for a visibility timeout and hands out a
// receipt valid for that claim only, and a claim that is neither acked nor
// extended in time comes back with attempt + 1 (at-least-once delivery).
//
// A Store (memqueue, redisqueue) does each operation atomically and never
// blocks; Broker adds the long poll on top, woken by the store's enqueue
// notifications and by one timer per queue, never by polling the store.
package queue

import (
	"context"
	"time"
)

// Message is one delivery of a claimed message.
type Message struct {
	ID      string
	Payload []byte
	// DeliverAt is when this delivery became due: the enqueue or nack due
	// time, or the visibility deadline a redelivery passed.
	DeliverAt time.Time
	// Attempt is 1 on the first delivery and grows by one on each.
	Attempt uint32
	// Receipt proves this claim; the next claim of the message voids it.
	Receipt string
	// VisibleAt is when the message comes back unless acked or extended.
	VisibleAt time.Time
}

// EnqueueRequest adds Payload under ID (generated when empty), due after
// Delay or at DeliverAt; zero values of both mean now.
type EnqueueRequest struct {
	Queue     string
	ID        string
	Payload   []byte
	Delay     time.Duration
	DeliverAt time.Time
}

// EnqueueResult says when the message is due; Duplicate means ID was
// already waiting or in flight and nothing was added.
type EnqueueResult struct {
	ID        string
	DeliverAt time.Time
	Duplicate bool
}

// ClaimRequest asks for up to Max due messages, hidden for Visibility
// (zero: DefaultVisibility). Wait is the Broker's long poll; stores ignore it.
type ClaimRequest struct {
	Queue      string
	Max        int
	Visibility time.Duration
	Wait       time.Duration
}

// ClaimResult holds the claimed messages, oldest due first, the store's
// clock when it claimed them, and when the next message is due (zero: none
// is waiting or in flight).
type ClaimResult struct {
	Messages []Message
	Now      time.Time
	NextDue  time.Time
}

// Stats is a queue's state for metrics.
type Stats struct {
	// Depth counts waiting messages (due or not), InFlight claimed ones.
	Depth, InFlight int64
	// OldestDueLag is how long the oldest due message has waited past its
	// due time (zero when nothing is due).
	OldestDueLag time.Duration
}

// Notification says that a queue has a message due at Due, earlier than
// anything it held before; Now is the store's clock at the time, so a
// replica can wait Due-Now on its own clock.
type Notification struct {
	Queue    string
	Due, Now time.Time
}

// Store is a queue backend. Every method is atomic and returns at once.
type Store interface {
	Enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error)
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	Ack(ctx context.Context, queue, id, receipt string) error
	// Nack makes the claimed message due again after delay and returns when.
	Nack(ctx context.Context, queue, id, receipt string, delay time.Duration) (time.Time, error)
	// Extend hides the claimed message until visibility from now.
	Extend(ctx context.Context, queue, id, receipt string, visibility time.Duration) (time.Time, error)
	Stats(ctx context.Context, queue string) (Stats, error)
	// Notify registers fn for notifications of new queue heads; stores call
	// it from their own goroutine and fn must not block.
	Notify(fn func(Notification))
	Close() error
}

// Queue is what the API serves: a Store's operations with a blocking Claim.
type Queue interface {
	Enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error)
	Claim(ctx context.Context, req ClaimRequest) ([]Message, error)
	Ack(ctx context.Context, queue, id, receipt string) error
	Nack(ctx context.Context, queue, id, receipt string, delay time.Duration) (time.Time, error)
	Extend(ctx context.Context, queue, id, receipt string, visibility time.Duration) (time.Time, error)
}

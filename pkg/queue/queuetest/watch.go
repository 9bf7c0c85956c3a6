package queuetest

import (
	"context"
	"sync"

	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

// WatchedStore is a Store that tells when a long poll over it waits with
// nothing left to wake it but a notification: a claim found the queue empty
// and has returned, no other claim is in flight, and, for a store that
// subscribes (its subscription is passed on as a notification for every
// queue, as redisqueue's is), the claim began after the latest such
// notification, so an enqueue's notification reaches the waiting poll.
type WatchedStore struct {
	queue.Store
	subscribes bool

	mu       sync.Mutex
	subs     int // subscription notifications delivered
	inFlight int
	empties  int // empty claims returned
	emptyAt  int // subs when the latest empty claim began
}

// Watch wraps st; subscribes says that st announces its subscription with a
// notification for every queue (Queue == "") and is only then notified of
// other replicas' enqueues.
func Watch(st queue.Store, subscribes bool) *WatchedStore {
	return &WatchedStore{Store: st, subscribes: subscribes}
}

// Notify implements queue.Store, counting subscription notifications.
func (w *WatchedStore) Notify(fn func(queue.Notification)) {
	w.Store.Notify(func(n queue.Notification) {
		if n.Queue == "" {
			w.mu.Lock()
			w.subs++
			w.mu.Unlock()
		}
		fn(n)
	})
}

// Claim implements queue.Store, recording empty claims.
func (w *WatchedStore) Claim(ctx context.Context, req queue.ClaimRequest) (queue.ClaimResult, error) {
	w.mu.Lock()
	began := w.subs
	w.inFlight++
	w.mu.Unlock()
	res, err := w.Store.Claim(ctx, req)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight--
	if err == nil && len(res.Messages) == 0 {
		w.empties++
		w.emptyAt = began
	}
	return res, err
}

// Waiting reports whether a long poll waits for a notification (see
// WatchedStore).
func (w *WatchedStore) Waiting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inFlight > 0 || w.empties == 0 {
		return false
	}
	return !w.subscribes || (w.subs > 0 && w.emptyAt == w.subs)
}

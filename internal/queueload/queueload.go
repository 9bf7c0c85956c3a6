// Package queueload drives the delay queue's gRPC API as the integration
// test's consumers and producers do: a ledger of every delivery, long-poll
// consumers, and the lateness figures. The same code runs in the test and
// in cmd/queueload, a driver built without the race detector so that the
// load measures the server, not an instrumented client.
package queueload

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
)

// Delivery is one message as a consumer received it.
type Delivery struct {
	ID        string
	Attempt   uint32
	Due       time.Time
	VisibleAt time.Time
	// ClaimedAt is when the consumer received it; ServedAt when the server
	// claimed it (visible_at - visibility_timeout, on Redis's clock).
	ClaimedAt, ServedAt time.Time
	Consumer            int
}

// Ledger records every delivery of a run.
type Ledger struct {
	mu     sync.Mutex
	ByID   map[string][]Delivery
	acked  map[string]bool
	Errors []string
}

func NewLedger() *Ledger {
	return &Ledger{ByID: map[string][]Delivery{}, acked: map[string]bool{}}
}

func (l *Ledger) Add(d Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ByID[d.ID] = append(l.ByID[d.ID], d)
}

func (l *Ledger) Ack(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[id] = true
}

func (l *Ledger) Fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.Errors) < 20 {
		l.Errors = append(l.Errors, fmt.Sprintf(format, args...))
	}
}

func (l *Ledger) AckedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// overlaps finds a message handed to a consumer while an earlier delivery's
// visibility still lasted (both times are the server's).
func (l *Ledger) Overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var bad []string
	for id, ds := range l.ByID {
		slices.SortFunc(ds, func(a, b Delivery) int { return int(a.Attempt) - int(b.Attempt) })
		for i := 1; i < len(ds); i++ {
			if ds[i].Due.Before(ds[i-1].VisibleAt) || ds[i].Attempt != ds[i-1].Attempt+1 {
				bad = append(bad, fmt.Sprintf("%s: delivery %+v while %+v was visible-held", id, ds[i], ds[i-1]))
			}
		}
	}
	return bad
}

// Consume long-polls queue through c until ctx ends, acking every message
// unless keep is set (a consumer that dies holding its claims).
func Consume(ctx context.Context, c queuev1.DelayQueueClient, queue string, id int, vis, wait time.Duration, keep bool, l *Ledger) {
	acks := make(chan *queuev1.Message, 100)
	var wg sync.WaitGroup
	// Acks run beside the claims so a consumer is back in a long poll at once.
	for range 2 {
		wg.Go(func() {
			for m := range acks {
				actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.Ack(actx, &queuev1.AckRequest{Queue: queue, Id: m.GetId(), Receipt: m.GetReceipt()})
				cancel()
				if err != nil {
					l.Fail("consumer %d: ack %s: %v", id, m.GetId(), err)
					continue
				}
				l.Ack(m.GetId())
			}
		})
	}
	defer func() { close(acks); wg.Wait() }()
	for ctx.Err() == nil {
		res, err := c.Claim(ctx, &queuev1.ClaimRequest{
			Queue: queue, MaxMessages: 10, VisibilityTimeout: durationpb.New(vis), Wait: durationpb.New(wait),
		})
		now := time.Now()
		if err != nil {
			if ctx.Err() == nil && !keep {
				l.Fail("consumer %d: claim: %v", id, err)
			}
			return
		}
		for _, m := range res.GetMessages() {
			l.Add(Delivery{
				ID: m.GetId(), Attempt: m.GetAttempt(), Due: m.GetDeliverAt().AsTime(),
				VisibleAt: m.GetVisibleAt().AsTime(), ClaimedAt: now, ServedAt: m.GetVisibleAt().AsTime().Add(-vis), Consumer: id,
			})
			if !keep {
				acks <- m
			}
		}
	}
}

// ProbeScheduling measures, until ctx ends, how late 2 ms sleeps wake up
// in this process, and sends their p99.
func ProbeScheduling(ctx context.Context) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		var over []time.Duration
		for ctx.Err() == nil {
			t0 := time.Now()
			time.Sleep(2 * time.Millisecond)
			over = append(over, time.Since(t0)-2*time.Millisecond)
		}
		slices.Sort(over)
		out <- Percentile(over, 0.99)
	}()
	return out
}

func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

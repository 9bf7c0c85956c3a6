package queueload

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
)

// Load is one due-time run: Messages enqueued by Producers with random
// delays up to MaxDelay, claimed by Consumers long polls spread over the
// clients, each message acked at once.
type Load struct {
	Queue                           string
	Messages, Producers, Consumers  int
	MaxDelay, Visibility, Wait, Max time.Duration
	// Rate paces the enqueues (messages per second; 0: as fast as they go),
	// so that the run measures lateness, not a backlog of a saturated host.
	Rate int
}

// Summary is what a Load measured. Lateness is claim time minus due time:
// Served by the server's claim time, Received by the consumer's.
type Summary struct {
	Messages, Acked, Deliveries int
	Enqueued, Total             time.Duration
	Overlaps, Errors            []string
	Served, Received            [3]time.Duration // p50, p99, max
	// Overshoot is the p99 of how late a 2 ms sleep woke in the driver.
	Overshoot time.Duration
}

// Run runs l against clients (round-robin) and waits at most l.Max for
// every message to be acked.
func Run(ctx context.Context, clients []queuev1.DelayQueueClient, l Load) Summary {
	led := NewLedger()
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range l.Consumers {
		wg.Go(func() { Consume(cctx, clients[i%len(clients)], l.Queue, i, l.Visibility, l.Wait, false, led) })
	}
	began := time.Now()
	probe := ProbeScheduling(cctx)
	var pwg sync.WaitGroup
	for p := range l.Producers {
		pwg.Go(func() {
			c := clients[p%len(clients)]
			for i := p; i < l.Messages; i += l.Producers {
				if l.Rate > 0 {
					time.Sleep(time.Until(began.Add(time.Duration(i) * time.Second / time.Duration(l.Rate))))
				}
				delay := time.Duration(rand.Int64N(int64(l.MaxDelay)))
				ectx, ecancel := context.WithTimeout(ctx, 5*time.Second)
				res, err := c.Enqueue(ectx, &queuev1.EnqueueRequest{
					Queue: l.Queue, Id: "m" + strconv.Itoa(i), Payload: []byte("x"), Delay: durationpb.New(delay),
				})
				ecancel()
				if err != nil || res.GetDuplicate() {
					led.Fail("enqueue %d: %v %v", i, res, err)
				}
			}
		})
	}
	pwg.Wait()
	s := Summary{Messages: l.Messages, Enqueued: time.Since(began)}
	deadline := time.Now().Add(l.Max)
	for led.AckedCount() < l.Messages && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	s.Total = time.Since(began)
	cancel()
	wg.Wait()
	s.Overshoot = <-probe
	s.Acked = led.AckedCount()
	s.Errors = led.Errors
	s.Overlaps = led.Overlaps()
	var served, received []time.Duration
	for _, ds := range led.ByID {
		s.Deliveries += len(ds)
		for _, d := range ds {
			served = append(served, d.ServedAt.Sub(d.Due))
			received = append(received, d.ClaimedAt.Sub(d.Due))
		}
	}
	slices.Sort(served)
	slices.Sort(received)
	if len(served) > 0 {
		s.Served = [3]time.Duration{Percentile(served, 0.5), Percentile(served, 0.99), served[len(served)-1]}
		s.Received = [3]time.Duration{Percentile(received, 0.5), Percentile(received, 0.99), received[len(received)-1]}
		if served[0] < 0 {
			s.Errors = append(s.Errors, "a message was claimed "+(-served[0]).String()+" before its due time")
		}
	}
	return s
}

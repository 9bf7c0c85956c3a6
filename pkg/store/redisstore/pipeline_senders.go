package redisstore

import (
	"context"
	"fmt"
	"time"
)

// maxIdleSenders bounds the sender goroutines kept waiting for a batch.
// More than one pipeline is in flight only when the window ends before a
// round trip does, rarely more than a few at once.
const maxIdleSenders = 4

// start hands batch (counted in flight) to an idle sender, or to a new one.
// Senders live on between batches so that their stacks, grown by go-redis's
// pipeline, stay grown: a goroutine per batch grew its stack anew each time
// (about 2% of the service's CPU under rlbench's load).
func (c *coalescer) start(batch []*pendingCall) {
	select {
	case c.work <- batch:
	default:
		go c.sender(batch)
	}
}

// sender runs batch, then waits for the next one, unless enough senders
// wait already or the coalescer is closed.
func (c *coalescer) sender(batch []*pendingCall) {
	for {
		c.run(batch)
		if c.idle.Add(1) > maxIdleSenders {
			c.idle.Add(-1)
			return
		}
		select {
		case batch = <-c.work:
			c.idle.Add(-1)
		case <-c.stop:
			c.idle.Add(-1)
			return
		}
	}
}

// run sends batch, then whatever queued while it was in flight, on this
// goroutine (whose stack is already grown) until the queue is empty.
func (c *coalescer) run(batch []*pendingCall) {
	for batch != nil {
		c.send(batch)
		batch = c.completed()
	}
}

// send writes one batch as a pipeline, bounded by the latest deadline among
// its callers (each of them still stops waiting at its own).
func (c *coalescer) send(batch []*pendingCall) {
	deadline := time.Now().Add(c.timeout)
	live := batch[:0:0]
	var latest time.Time
	for _, p := range batch {
		if p.ctx.Err() != nil {
			// Its caller has answered already: sending would charge a
			// decision nobody learns about.
			p.cmd.SetErr(fmt.Errorf("not sent: %w", p.ctx.Err()))
			p.done <- struct{}{}
			continue
		}
		live = append(live, p)
		if d, ok := p.ctx.Deadline(); ok && d.After(latest) {
			latest = d
		}
	}
	if len(live) == 0 {
		return
	}
	if !latest.IsZero() && latest.Before(deadline) {
		deadline = latest
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	pipe := c.pipe()
	merges := queue(ctx, pipe, live, c.slotted, c.batch)
	// Each command carries its own error; Exec's is only the first of them.
	_, _ = pipe.Exec(ctx)
	for _, m := range merges {
		m.split()
	}
	for _, p := range live {
		p.done <- struct{}{}
	}
}

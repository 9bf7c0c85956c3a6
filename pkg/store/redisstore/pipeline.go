package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPipelineWindow is REDIS_PIPELINE_WINDOW's default (envoyproxy's
// is 0). A lone caller never waits; longer than a loaded round trip, what
// queues behind a pipeline goes as one batch (docs/performance.md).
const DefaultPipelineWindow = 2 * time.Millisecond

// WithPipeline is REDIS_PIPELINE_WINDOW and REDIS_PIPELINE_LIMIT: concurrent
// script calls share one pipelined round trip. window bounds how long a call
// may wait for others (0 disables coalescing); limit caps the calls in one
// pipeline (0 = no cap). It applies to the clients New builds; on Cluster,
// each node has its own pipeline. A client from WithClient is left alone.
func WithPipeline(window time.Duration, limit int) Option {
	return func(s *settings) { s.pipelineWindow, s.pipelineLimit = window, limit }
}

// coalesced says whether a command is one a decision runs; others (PING,
// SCRIPT LOAD, FUNCTION LOAD, TIME) go straight through.
func coalesced(name string) bool {
	switch name {
	case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// coalescer is a go-redis hook that gathers concurrent script calls into
// pipelines: one write and one read for many decisions, on the service's
// side and on Redis's; and, within a pipeline, the takes into one call of
// the takes function (merge.go).
//
// A call is sent at once when no pipeline is in flight (a lone caller pays
// nothing). Otherwise it queues; the queue is sent when a pipeline in flight
// completes, when it holds limit calls, or when its oldest call has waited
// window, whichever comes first. So window is an upper bound on the added
// wait, as REDIS_PIPELINE_WINDOW is in envoyproxy/ratelimit, not a fixed
// delay.
//
// A decision is charged at most once: a pipeline is never retried (its
// commands say NoRetry whatever the client's MaxRetries), a call whose
// deadline passed before its pipeline was written is dropped from it, and
// each caller waits only until its own deadline.
type coalescer struct {
	window  time.Duration
	limit   int
	timeout time.Duration // REDIS_TIMEOUT, for a caller without a deadline
	pipe    func() redis.Pipeliner
	// slotted: a Cluster node's, where one script's keys must share a slot,
	// so only takes of the same slot merge.
	slotted bool
	batch   int // the most takes in one merged call (WithBatchLimit)

	mu       sync.Mutex
	queue    []*pendingCall
	inFlight int
	timer    *time.Timer
	armed    bool

	// Senders waiting for a batch (start) and how many; stop ends them.
	work     chan []*pendingCall
	idle     atomic.Int32
	stop     chan struct{}
	stopOnce sync.Once
}

// pendingCall is one caller's command, copied so the pipeline never writes
// to a command its caller may already have given up on. done is buffered:
// the sender signals it once and never waits for a caller that has gone.
// A caller that got its answer returns the call to pendingCalls (a caller
// that gave up cannot: the sender still holds it).
type pendingCall struct {
	ctx  context.Context
	cmd  *redis.Cmd
	done chan struct{}
}

var pendingCalls = sync.Pool{New: func() any { return &pendingCall{done: make(chan struct{}, 1)} }}

// onceCmd marks a pipelined command as never to be retried: it may have run.
type onceCmd struct{ *redis.Cmd }

func (onceCmd) NoRetry() bool { return true }

var _ redis.Hook = (*coalescer)(nil)

// coalesce installs coalescers on c when s asks for them: one on a plain
// or Sentinel client, one per node (as go-redis creates it) on a Cluster
// client. It returns what stops them.
func coalesce(c redis.UniversalClient, s settings) (stop func()) {
	if s.pipelineWindow <= 0 {
		return func() {}
	}
	switch c := c.(type) {
	case *redis.Client:
		co := newCoalescer(s, c.Pipeline)
		c.AddHook(co)
		return co.close
	case *redis.ClusterClient:
		var mu sync.Mutex
		var nodes []*coalescer
		// Every command to a node goes through that node's client, and
		// New installs this before any command creates a node.
		c.OnNewNode(func(node *redis.Client) {
			co := newCoalescer(s, node.Pipeline)
			co.slotted = true
			node.AddHook(co)
			mu.Lock()
			nodes = append(nodes, co)
			mu.Unlock()
		})
		return func() {
			mu.Lock()
			defer mu.Unlock()
			for _, co := range nodes {
				co.close()
			}
		}
	}
	return func() {}
}

func newCoalescer(s settings, pipe func() redis.Pipeliner) *coalescer {
	c := &coalescer{window: s.pipelineWindow, limit: s.pipelineLimit, timeout: s.conn.Timeout, pipe: pipe, batch: s.batchLimit,
		work: make(chan []*pendingCall), stop: make(chan struct{})}
	c.timer = time.AfterFunc(time.Hour, c.windowElapsed)
	c.timer.Stop()
	return c
}

func (c *coalescer) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *coalescer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *coalescer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		outer, ok := cmd.(*redis.Cmd)
		if !ok || !coalesced(cmd.Name()) {
			return next(ctx, cmd)
		}
		return c.call(ctx, outer, next)
	}
}

func (c *coalescer) call(ctx context.Context, outer *redis.Cmd, next redis.ProcessHook) error {
	c.mu.Lock()
	if c.inFlight == 0 {
		// Alone: the plain path on the caller's goroutine, as without
		// coalescing, and nothing to allocate.
		c.inFlight++
		c.mu.Unlock()
		err := next(ctx, outer)
		if batch := c.completed(); batch != nil {
			c.start(batch)
		}
		return err
	}
	p := pendingCalls.Get().(*pendingCall)
	p.ctx, p.cmd = ctx, redis.NewCmd(ctx, outer.Args()...)
	c.queue = append(c.queue, p)
	var batch []*pendingCall
	if c.limit > 0 && len(c.queue) >= c.limit {
		batch = c.takeLocked()
	} else {
		c.armLocked()
	}
	c.mu.Unlock()

	if batch != nil {
		c.start(batch)
	}
	select {
	case <-p.done:
		err := p.cmd.Err()
		if err != nil {
			outer.SetErr(err)
		} else {
			outer.SetVal(p.cmd.Val())
		}
		p.ctx, p.cmd = nil, nil
		pendingCalls.Put(p)
		return err
	case <-ctx.Done():
		err := fmt.Errorf("pipelined %s: %w", outer.Name(), ctx.Err())
		outer.SetErr(err)
		return err
	}
}

// takeLocked removes up to limit calls from the queue as the next batch and
// counts it in flight.
func (c *coalescer) takeLocked() []*pendingCall {
	n := len(c.queue)
	if c.limit > 0 && n > c.limit {
		n = c.limit
	}
	batch := make([]*pendingCall, n)
	copy(batch, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	c.inFlight++
	if len(c.queue) == 0 && c.armed {
		c.timer.Stop()
		c.armed = false
	}
	return batch
}

func (c *coalescer) armLocked() {
	if !c.armed {
		c.armed = true
		c.timer.Reset(c.window)
	}
}

func (c *coalescer) windowElapsed() {
	c.mu.Lock()
	c.armed = false
	var batch []*pendingCall
	if len(c.queue) > 0 {
		batch = c.takeLocked()
		if len(c.queue) > 0 {
			c.armLocked()
		}
	}
	c.mu.Unlock()
	if batch != nil {
		// Not on the timer's goroutine, a new one each time.
		c.start(batch)
	}
}

// completed ends one pipeline (or lone call) and returns what queued
// meanwhile, counted in flight, for the caller to send.
func (c *coalescer) completed() []*pendingCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	if len(c.queue) == 0 {
		return nil
	}
	batch := c.takeLocked()
	if len(c.queue) > 0 {
		c.armLocked()
	}
	return batch
}

// close stops the window timer and the idle senders; calls in flight end
// by their deadlines.
func (c *coalescer) close() {
	c.mu.Lock()
	c.timer.Stop()
	c.armed = false
	c.mu.Unlock()
	c.stopOnce.Do(func() { close(c.stop) })
}

package redisconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of REDIS_BREAKER_THRESHOLD and REDIS_BREAKER_PROBE_INTERVAL.
const (
	DefaultBreakerThreshold     = 3
	DefaultBreakerProbeInterval = 100 * time.Millisecond
)

// maxProbeTimeout bounds one probe's PING, so a black-holed node is asked
// again soon even under a long REDIS_TIMEOUT.
const maxProbeTimeout = time.Second

// ErrBreakerOpen is what a call gets, at once, while its node's breaker is
// open: the node failed several calls in a row in a way that certainly ran
// nothing, and has not answered a probe since.
var ErrBreakerOpen = errors.New("circuit breaker open")

// breakerOpenError names the node whose breaker refused the call.
type breakerOpenError struct{ node string }

func (e breakerOpenError) Error() string {
	return fmt.Sprintf("redis node %s: %s", e.node, ErrBreakerOpen)
}

func (e breakerOpenError) Is(target error) bool { return target == ErrBreakerOpen }

// breaker is one node's circuit breaker, a go-redis hook on that node's
// client (Config.BreakerThreshold turns them on). Without it a dead Redis
// cost every call its whole deadline, since redisstore's Store.do retries
// errors that certainly ran nothing until the deadline (right for a redirect
// or a failover in progress, wasted on a node that is down).
type breaker struct {
	node      string
	threshold int32
	interval  time.Duration
	timeout   time.Duration
	ping      func(context.Context) error
	// gone is told when the node's client was closed (Cluster drops nodes
	// that leave the slot map), so its state stops being reported.
	gone func(*breaker)
	// changed is Config.OnBreakerChange; nil tells no one.
	changed func(node string, open bool)
	done    chan struct{}

	failures atomic.Int32
	open     atomic.Bool
	refused  atomic.Uint64
}

var _ redis.Hook = (*breaker)(nil)

// probeKey marks the probe's own PING, which must pass an open breaker.
type probeKey struct{}

func (b *breaker) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			// See failedConn: the pool must not count dial errors, or it
			// stops dialing for a second after the node is back.
			return failedConn{err: err}, nil
		}
		return conn, nil
	}
}

func (b *breaker) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (b *breaker) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if b.open.Load() {
			// Only the prober's own command passes an open breaker; the
			// context is looked at only then, off the closed-breaker path.
			if ctx.Value(probeKey{}) != nil {
				return next(ctx, cmd)
			}
			b.refused.Add(1)
			err := breakerOpenError{node: b.node}
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		if !setupCommand(cmd.Name()) {
			b.record(err)
		}
		return err
	}
}

// record counts consecutive node-down errors; any answer from the node
// resets the count, and an outcome that says nothing about the node (a
// timeout, a lost reply) leaves it as it is.
func (b *breaker) record(err error) {
	switch {
	case err == nil || answered(err):
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
	case nodeDown(err):
		if b.failures.Add(1) >= b.threshold && b.open.CompareAndSwap(false, true) {
			b.tell(true)
			go b.probe()
		}
	}
}

// probe PINGs the node every interval until it answers, then closes the
// breaker. It is the only traffic to the node while the breaker is open.
func (b *breaker) probe() {
	t := time.NewTicker(b.interval)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), probeKey{}, true), b.timeout)
		err := b.ping(ctx)
		cancel()
		switch {
		case err == nil:
			b.failures.Store(0)
			b.open.Store(false)
			b.tell(false)
			return
		case errors.Is(err, redis.ErrClosed):
			b.gone(b)
			return
		}
	}
}

// tell reports a change of state: the caller made it, so once per change.
func (b *breaker) tell(open bool) {
	if b.changed != nil {
		b.changed(b.node, open)
	}
}

// stop ends the probe, if one runs; the breaker then refuses nothing.
func (b *breaker) stop() {
	close(b.done)
	b.open.Store(false)
}

// setupCommand: go-redis runs these on a new connection, through the hooks,
// inside the call that needed the connection; that call records the outcome,
// so it must not count twice.
func setupCommand(name string) bool {
	switch name {
	case "hello", "auth", "client", "select", "readonly":
		return true
	}
	return false
}

// nodeDown tells errors that say the node cannot run commands now from
// others: a dial that failed, or a state in which Redis refuses every
// command (cluster down, loading its data set, replica without master).
func nodeDown(err error) bool {
	if errors.Is(err, ErrBreakerOpen) {
		return false
	}
	if redis.IsClusterDownError(err) || redis.IsLoadingError(err) || redis.HasErrorPrefix(err, "MASTERDOWN") {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// answered: the node replied (an error reply such as MOVED, NOSCRIPT or a
// script error), so it is up.
func answered(err error) bool {
	var redisErr redis.Error
	return errors.As(err, &redisErr) && !nodeDown(err)
}

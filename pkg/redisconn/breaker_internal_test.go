package redisconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverReply is an error reply from Redis, as go-redis returns it.
type serverReply string

func (e serverReply) Error() string { return string(e) }
func (serverReply) RedisError()     {}

// The breaker opens on threshold consecutive node-down errors only: a
// reply from the node resets the count, and an error that says nothing
// about the node (a timeout, a lost reply) neither counts nor resets.
func TestBreakerCountsConsecutiveNodeDownErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		errs []error
		open bool
	}{
		{"one transient dial error", []error{refused}, false},
		{"two, then an answer, then two", []error{refused, refused, nil, refused, refused}, false},
		{"three dial errors", []error{refused, refused, refused}, true},
		{"wrapped, as the runner returns them", []error{fmt.Errorf("take: %w", refused), refused, refused}, true},
		{"cluster down and loading", []error{serverReply("CLUSTERDOWN The cluster is down"), serverReply("LOADING Redis is loading"), serverReply("MASTERDOWN Link with MASTER is down")}, true},
		{"a script error is an answer", []error{refused, refused, serverReply("ERR script failed"), refused}, false},
		{"MOVED is an answer", []error{refused, refused, serverReply("MOVED 3999 127.0.0.1:6381"), refused}, false},
		{"timeouts and EOF neither count nor reset", []error{refused, io.EOF, context.DeadlineExceeded, refused, refused}, true},
		{"a refusal by the breaker itself does not count", []error{breakerOpenError{"n"}, breakerOpenError{"n"}, breakerOpenError{"n"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var told atomic.Int32
			b := &breaker{node: "n", threshold: 3, interval: time.Hour, done: make(chan struct{}),
				ping:    func(context.Context) error { return errors.New("down") },
				changed: func(string, bool) { told.Add(1) }}
			defer b.stop()
			for _, err := range tt.errs {
				b.record(err)
			}
			if got := b.open.Load(); got != tt.open {
				t.Errorf("open = %v after %v, want %v", got, tt.errs, tt.open)
			}
			for range 3 {
				b.record(refused)
			}
			if told.Load() != 1 {
				t.Errorf("told %d changes, want 1: it opens once however many errors follow", told.Load())
			}
		})
	}
}

// An open breaker answers at once with ErrBreakerOpen, counted, without
// calling the node; its probe closes it once the node answers a PING (here:
// the second probe, one interval after the first). Each change is told
// once. The bubble's clock steps the probe's ticker: no real time passes.
func TestBreakerRefusesUntilProbeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pings, opened, closed atomic.Int32
		b := &breaker{node: "n", threshold: 1, interval: 50 * time.Millisecond, timeout: time.Second, done: make(chan struct{}),
			changed: func(node string, open bool) {
				if open {
					opened.Add(1)
				} else {
					closed.Add(1)
				}
			},
			ping: func(context.Context) error {
				if pings.Add(1) == 1 {
					return errors.New("still down")
				}
				return nil
			}}
		defer b.stop()
		calls := 0
		process := b.ProcessHook(func(context.Context, redis.Cmder) error {
			calls++
			return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		})
		if err := process(t.Context(), redis.NewCmd(t.Context(), "fcall")); errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("first call: %v, want the dial error", err)
		}
		err := process(t.Context(), redis.NewCmd(t.Context(), "fcall"))
		// That redisstore does not retry it (classifies it shed) is
		// redisstore's TestBreakerRefusalIsShed.
		if !errors.Is(err, ErrBreakerOpen) || calls != 1 || b.refused.Load() != 1 {
			t.Errorf("call while open: %v (%d calls reached the node, %d refused), want ErrBreakerOpen, refused without reaching the node",
				err, calls, b.refused.Load())
		}
		for probe, wantOpen := range []bool{true, false} {
			time.Sleep(b.interval)
			synctest.Wait()
			if b.open.Load() != wantOpen || pings.Load() != int32(probe+1) {
				t.Fatalf("after probe %d: open = %v after %d pings, want %v", probe+1, b.open.Load(), pings.Load(), wantOpen)
			}
		}
		if opened.Load() != 1 || closed.Load() != 1 {
			t.Errorf("told %d openings and %d closings, want one of each", opened.Load(), closed.Load())
		}
		if err := process(t.Context(), redis.NewCmd(t.Context(), "fcall")); errors.Is(err, ErrBreakerOpen) || calls != 2 {
			t.Errorf("call after the probe answered: %v, %d calls reached the node; want it to reach the node", err, calls)
		}
	})
}

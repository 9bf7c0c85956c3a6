package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// faultHook fails the first n script calls whose SHA is sha with err,
// before they reach Redis: the command never runs, whatever err says.
type faultHook struct {
	sha   string
	err   error
	n     atomic.Int64
	calls atomic.Int64
}

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// sha is a script's SHA1 for EVALSHA or a function's name for FCALL.
		if args := cmd.Args(); (cmd.Name() == "evalsha" || cmd.Name() == "fcall") && len(args) > 1 && args[1] == h.sha {
			h.calls.Add(1)
			if h.n.Add(-1) >= 0 {
				cmd.SetErr(h.err)
				return h.err
			}
		}
		return next(ctx, cmd)
	}
}

// What a failing undo costs: a certainly-not-run failure is retried and the
// counters end as they were; an outcome-unknown one is not retried, is
// reported once, leaves the hits charged, and the request is still denied.
func TestUndoFailure(t *testing.T) {
	nodes, admins := startCluster(t)
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name      string
		err       error
		failures  int64
		wantCalls int64 // undo EVALSHAs seen by the hook
		leaked    bool
	}{
		{"dial refused twice, then retried", dialRefused, 2, 2 + 2, false},
		{"EOF: outcome unknown, not retried", io.EOF, 2, 2, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hook := &faultHook{sha: scripts.UndoFunction(), err: tt.err}
			hook.n.Store(tt.failures)
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}, MaxRetries: -1, MaxRedirects: -1})
			t.Cleanup(func() { _ = c.Close() })
			c.AddHook(hook)
			var mu sync.Mutex
			var reported []error
			s := newStore(t, redisstore.WithClient(c), redisstore.WithTimeout(2*time.Second), fixedClock(),
				redisstore.WithUndoFailure(func(charges int, err error) {
					mu.Lock()
					defer mu.Unlock()
					reported = append(reported, fmt.Errorf("%d charges: %w", charges, err))
				}))
			keys := keysOnMasters(t, admins, fmt.Sprintf("undo%d-", i))
			lim := window(3)
			mustTake(t, s, []store.Request{{Key: keys[0], Limit: lim, Hits: 3}})
			res := mustTake(t, s, []store.Request{{Key: keys[0], Limit: lim, Hits: 1}, {Key: keys[1], Limit: lim, Hits: 1}, {Key: keys[2], Limit: lim, Hits: 1}})
			if res[0].Allowed {
				t.Fatalf("exhausted counter admitted: %+v", res)
			}
			if got := hook.calls.Load(); got != tt.wantCalls {
				t.Errorf("undo EVALSHA sent %d times, want %d", got, tt.wantCalls)
			}
			want := uint64(3)
			if tt.leaked {
				want = 2
			}
			for _, k := range keys[1:] {
				if got := mustTake(t, s, []store.Request{{Key: k, Limit: lim}})[0].Remaining; got != want {
					t.Errorf("%s: remaining %d after the denied request, want %d", k, got, want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			// One report per failed undo (one per master that charged).
			if tt.leaked && len(reported) != 2 || !tt.leaked && len(reported) != 0 {
				t.Errorf("undo failures reported: %v", reported)
			}
		})
	}
}

// A script that certainly never runs is retried only within the deadline
// (testkit.Slack past it), not until REDIS_TIMEOUT (10 s).
func TestRetryStaysWithinDeadline(t *testing.T) {
	srv := redistest.Start(t)
	hook := &faultHook{sha: scripts.TakeFunction(), err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	hook.n.Store(1 << 30)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	c.AddHook(hook)
	s := newStore(t, redisstore.WithClient(c))
	for _, d := range []time.Duration{20 * time.Millisecond, 150 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		start := time.Now()
		_, err := s.Take(ctx, batch(1, window(5), 1))
		took := time.Since(start)
		cancel()
		if err == nil || took > d+testkit.Slack {
			t.Errorf("deadline %s: err %v after %s", d, err, took)
		}
		t.Logf("deadline %s: %d attempts in %s", d, hook.calls.Swap(0), took)
	}
}

// stallHook holds every take naming key until its caller's deadline: that
// group times out without running while the request's other groups charge.
type stallHook struct{ key string }

func (h stallHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.names(cmd) {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}
func (h stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if h.names(cmd) {
				<-ctx.Done()
				for _, c := range cmds {
					c.SetErr(ctx.Err())
				}
				return ctx.Err()
			}
		}
		return next(ctx, cmds)
	}
}
func (h stallHook) names(cmd redis.Cmder) bool {
	if cmd.Name() != "fcall" && cmd.Name() != "evalsha" {
		return false
	}
	for _, a := range cmd.Args() {
		if a == h.key {
			return true
		}
	}
	return false
}

// A request whose group on one master timed out fails; the charges its
// other groups made are undone on a deadline of their own, not the
// caller's, which has passed: every counter ends as it was.
func TestUndoOutlivesTheCallersDeadline(t *testing.T) {
	nodes, admins := startCluster(t)
	keys := keysOnMasters(t, admins, "late-undo-")
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	c.AddHook(stallHook{key: keys[2]})
	var failures atomic.Int64
	s := newStore(t, redisstore.WithClient(c), redisstore.WithTimeout(5*time.Second), fixedClock(),
		redisstore.WithUndoFailure(func(int, error) { failures.Add(1) }))
	lim := window(3)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.Take(ctx, []store.Request{{Key: keys[0], Limit: lim, Hits: 1}, {Key: keys[1], Limit: lim, Hits: 1}, {Key: keys[2], Limit: lim, Hits: 1}}); err == nil {
		t.Fatal("a request whose group timed out was answered")
	}
	if err := s.Close(); err != nil { // waits for the undos still running
		t.Fatal(err)
	}
	if n := failures.Load(); n != 0 {
		t.Errorf("%d undo failures reported", n)
	}
	check := newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), fixedClock())
	for _, k := range keys[:2] {
		if got := mustTake(t, check, []store.Request{{Key: k, Limit: lim}})[0].Remaining; got != 3 {
			t.Errorf("%s: remaining %d after the failed request, want 3", k, got)
		}
	}
}

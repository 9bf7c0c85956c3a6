package redisstore_test

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// countingHook records every command the store sends, client-side.
type countingHook struct {
	mu    sync.Mutex
	names []string
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.names = append(h.names, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		for _, c := range cmds {
			h.names = append(h.names, "pipeline:"+c.Name())
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *countingHook) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.names
	h.names = nil
	return out
}

// TestOneRoundTripPerTake counts on both ends: the go-redis hook sees what
// the store sends, INFO commandstats what Redis executed.
func TestOneRoundTripPerTake(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	hook := &countingHook{}
	client.AddHook(hook)
	s := newStore(t, redisstore.WithClient(client))

	// The first Take may load the library ("Function not found", FUNCTION
	// LOAD, FCALL again) on a fresh server.
	mustTake(t, s, batch(1, window(100), 1))
	hook.take()
	if err := client.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	hook.take()

	const takes = 10
	for _, n := range []int{1, 5, 20} {
		for range takes {
			res := mustTake(t, s, batch(n, window(1000), 1))
			if len(res) != n {
				t.Fatalf("Take of %d ops returned %d results", n, len(res))
			}
			if sent := hook.take(); len(sent) != 1 || sent[0] != "fcall" {
				t.Fatalf("Take of %d ops sent %v, want exactly [fcall]", n, sent)
			}
		}
	}

	stats := commandStats(t, client)
	if got := stats["fcall"]; got != 3*takes {
		t.Errorf("Redis ran fcall %d times for %d Takes", got, 3*takes)
	}
	// Commands the script calls count too (hmget, pexpire, ...); what
	// matters is that each Take entered Redis once, and never as a script
	// or a library load.
	if got := stats["eval"] + stats["evalsha"] + stats["function|load"]; got != 0 {
		t.Errorf("Redis ran eval, evalsha or function load %d times: the library was missed", got)
	}
}

// commandStats is INFO commandstats' calls per command.
func commandStats(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	stats := map[string]int{}
	for name, s := range redistest.CommandStats(t, c) {
		stats[name] = int(s.Calls)
	}
	return stats
}

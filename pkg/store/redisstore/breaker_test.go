package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// With Redis stopped, 20 concurrent callers with Envoy's 20 ms deadline get
// their error at once, not at their deadline, once the breaker has opened;
// a restarted Redis answers again within a few probe intervals.
func TestBreakerFailsFastWhileRedisIsDown(t *testing.T) {
	srv := redistest.Start(t)
	set := redisstore.NewBreakerSet()
	s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithBreakerSet(set))
	mustTake(t, s, batch(1, window(5), 1))

	srv.Stop()
	answers := takeWhileDown(t, s, 20, time.Second)

	var took []time.Duration
	deadlines, refused := 0, 0
	for _, a := range answers {
		if a.err == nil {
			t.Fatalf("Take succeeded %s after Redis stopped", a.at)
		}
		if a.at < 100*time.Millisecond {
			continue
		}
		took = append(took, a.took)
		if errors.Is(a.err, context.DeadlineExceeded) {
			deadlines++
		}
		if errors.Is(a.err, redisstore.ErrBreakerOpen) {
			refused++
		}
	}
	slices.Sort(took)
	p50, p99 := took[len(took)/2], took[len(took)*99/100]
	t.Logf("Redis down, after the first 100 ms: %d errors, %d refused by the breaker, %d deadline exceeded, p50 %s, p99 %s",
		len(took), refused, deadlines, p50, p99)
	// The property is that errors do not wait for the 20 ms deadline: the
	// breaker refuses every call but its probes (one per probe interval,
	// a real attempt, which a stalled machine may let reach its deadline).
	// The p99 bound is generous for -race on a loaded 2-core machine.
	probes := int(time.Second/redisstore.DefaultBreakerProbeInterval) + 1
	if attempts := len(took) - refused; attempts > 2*probes || p99 > 10*time.Millisecond {
		t.Errorf("with the breaker open: %d calls not refused (%d at their deadline), p99 %s; want at most %d probes and errors at once",
			attempts, deadlines, p99, 2*probes)
	}
	if st := set.States(); len(st) != 1 || st[0].Node != srv.Addr || !st[0].Open || st[0].Refused == 0 {
		t.Errorf("breaker states with Redis down: %+v, want %s open with refusals", st, srv.Addr)
	}

	srv.Restart(t)
	recovered := untilAnswered(t, s)
	t.Logf("first answer %s after Redis was back", recovered)
	if recovered > 500*time.Millisecond {
		t.Errorf("first answer %s after Redis was back, want within 500 ms", recovered)
	}
	if st := set.States(); len(st) != 1 || st[0].Open {
		t.Errorf("breaker states after recovery: %+v, want closed", st)
	}
}

// downAnswer is one Take made while Redis was down.
type downAnswer struct {
	at, took time.Duration // since the calls began; how long it took
	err      error
}

// takeWhileDown runs callers concurrent loops of Takes with Envoy's 20 ms
// deadline for span.
func takeWhileDown(t *testing.T, s *redisstore.Store, callers int, span time.Duration) []downAnswer {
	var (
		mu      sync.Mutex
		answers []downAnswer
		wg      sync.WaitGroup
	)
	begun := time.Now()
	for range callers {
		wg.Go(func() {
			for time.Since(begun) < span {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
				start := time.Now()
				_, err := s.Take(ctx, batch(1, window(5), 1))
				took := time.Since(start)
				cancel()
				mu.Lock()
				answers = append(answers, downAnswer{at: start.Sub(begun), took: took, err: err})
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	return answers
}

// untilAnswered polls with 20 ms Takes until one succeeds and returns how
// long that took.
func untilAnswered(t *testing.T, s *redisstore.Store) time.Duration {
	t.Helper()
	restarted := time.Now()
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		_, err := s.Take(ctx, batch(1, window(5), 1))
		cancel()
		if err == nil {
			break
		}
		if time.Since(restarted) > 5*time.Second {
			t.Fatalf("no answer 5 s after Redis restarted: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(restarted)
}

package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// noticeErrors collects what WithNoticeFailure is told.
type noticeErrors struct {
	mu   sync.Mutex
	errs map[string][]error
}

func (n *noticeErrors) add(op string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.errs == nil {
		n.errs = map[string][]error{}
	}
	n.errs[op] = append(n.errs[op], err)
}

func (n *noticeErrors) of(op string) []error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.errs[op]
}

// deafRedis starts a Redis with the user rl (password pw) allowed every
// key and command but refused the notices' channel, and returns its address.
func deafRedis(t *testing.T) string {
	t.Helper()
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "rl", "on", ">pw", "~*", "&elsewhere", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	return srv.Addr
}

// A refund is applied and answered whatever becomes of its notice: on a
// Redis whose ACL refuses the store's user the notices' channel, a refund
// of a spent counter is answered OK with the room it gave back, and the
// refused PUBLISH is reported (WithNoticeFailure), not returned. The take
// script published it itself before, so the same NOPERM failed the refund.
func TestRefundAnsweredWhenItsNoticeFails(t *testing.T) {
	var failures noticeErrors
	s := newStore(t, redisstore.WithAddr(deafRedis(t)), redisstore.WithAuth("rl:pw"), fixedClock(), redisstore.WithNoticeFailure(failures.add))
	lim := window(2)
	mustTake(t, s, []store.Request{{Key: "k", Limit: lim, Hits: 2}})
	res := mustTake(t, s, []store.Request{{Key: "k", Limit: lim, Hits: 1, Mode: algorithms.NegativeHits}})
	if !res[0].Allowed || res[0].Remaining != 1 {
		t.Fatalf("refund of 1 of a spent counter: %+v, want allowed with 1 left", res[0])
	}
	if res := mustTake(t, s, []store.Request{{Key: "k", Limit: lim, Hits: 1}}); !res[0].Allowed {
		t.Fatalf("a hit after the refund: %+v, want it admitted", res[0])
	}
	// Published in the background: heard of once it was refused.
	testkit.WaitFor(t, 10*time.Second, "the refused PUBLISH reported", func() bool { return len(failures.of("publish")) > 0 })
	errs := failures.of("publish")
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "NOPERM") {
		t.Fatalf("publish failures %v, want one NOPERM", errs)
	}
}

// The notices' channel starts with CACHE_KEY_PREFIX (WithKeyPrefix): a
// reset under one prefix is heard on that prefix's channel only.
func TestNoticeChannelHonoursThePrefix(t *testing.T) {
	srv := redistest.Start(t)
	sub := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = sub.Close() })
	ps := sub.Subscribe(t.Context(), redisstore.RefundChannel("tenant_"), redisstore.RefundChannel(""))
	t.Cleanup(func() { _ = ps.Close() })
	for range 2 {
		if _, err := ps.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithKeyPrefix("tenant_"))
	if _, err := s.Reset(t.Context(), []string{"tenant_{d:1:k:1:v}:fixed_window.int:60s"}); err != nil {
		t.Fatal(err)
	}
	msg, err := ps.ReceiveMessage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if msg.Channel != "tenant_ratelimitd:refunds" || msg.Payload != "tenant_{d:1:k:1:v}:fixed_window.int:60s" {
		t.Fatalf("heard %q on %q, want the key on tenant_ratelimitd:refunds", msg.Payload, msg.Channel)
	}
	if redisstore.RefundChannel("") != "ratelimitd:refunds" {
		t.Fatalf("the channel without a prefix is %q, want ratelimitd:refunds as before", redisstore.RefundChannel(""))
	}
}

// A subscription the server refuses is reported (WithNoticeFailure) on
// every attempt, paced, and made again until WatchRefunds' context ends.
func TestSubscriptionFailureReported(t *testing.T) {
	var failures noticeErrors
	s := newStore(t, redisstore.WithAddr(deafRedis(t)), redisstore.WithAuth("rl:pw"), redisstore.WithNoticeFailure(failures.add))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- s.WatchRefunds(ctx, func(...string) {}, func() { t.Error("subscribed on a refused channel") })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(failures.of("subscribe")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("subscription failures %v, want two reported", failures.of("subscribe"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchRefunds ended with %v, want its context's error", err)
	}
	if err := failures.of("subscribe")[0]; !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("subscription failure %v, want NOPERM", err)
	}
}

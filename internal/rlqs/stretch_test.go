package rlqs_test

import (
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// sentAction is an action the server sent, and the fake time by which it
// had sent it.
type sentAction struct {
	at time.Time
	a  *rlqsv3.RateLimitQuotaResponse_BucketAction
}

// TestStretchReachesEnvoyInTime: the token bucket sent again near its
// window's end to stretch its TTL is sent early enough that, delivered
// within the expiry margin, it reaches Envoy before the TTL it stretches
// can have run out, however the grant's first TTL fell. Envoy drops a
// token bucket whose TTL ran out, and starts the same one sent again
// full: tokens no ledger counted. Its own TTL still ends before the window.
func TestStretchReachesEnvoyInTime(t *testing.T) {
	margin := rlqs.DefaultExpiryMargin
	window := 10 * time.Second
	// When in its window the grant is made: its first TTL is the whole
	// seconds of what is left less the margin, so the offset sets how
	// much of a second that TTL gives up (at a second less the margin,
	// none: nothing to stretch).
	exact := time.Second - margin - 10*time.Millisecond
	for _, tt := range []struct {
		offset  time.Duration
		stretch bool
	}{{200 * time.Millisecond, true}, {500 * time.Millisecond, true}, {exact + 20*time.Millisecond, true}, {990 * time.Millisecond, true}, {exact, false}} {
		offset := tt.offset
		t.Run(offset.String(), func(t *testing.T) {
			clock := rlqstest.NewClock(windowStart.Add(offset))
			rep := startReplica(t, newRules(t, fleetRules), memstore.New(memstore.WithClock(clock.Now)), clock)
			got := watchActions(t, rep, clock, usage("edge", hot, 1))
			waitQuick(t, "the first assignment", func() bool { return len(got()) == 1 })
			for end := windowStart.Add(window); clock.Now().Before(end); {
				clock.Advance(10 * time.Millisecond)
				waitQuick(t, "the server to settle", func() bool {
					st := rep.srv.Stats()
					return st.Pending == 0 && int64(len(got())) == st.Responses
				})
			}
			acts := got()
			if want := map[bool]int{true: 2, false: 1}[tt.stretch]; len(acts) != want {
				t.Fatalf("%d assignments in the window, want %d (the block, and a stretch: %v)", len(acts), want, tt.stretch)
			}
			if !tt.stretch {
				return
			}
			first, stretch := acts[0], acts[1]
			if a, b := first.a.GetQuotaAssignmentAction().GetRateLimitStrategy(), stretch.a.GetQuotaAssignmentAction().GetRateLimitStrategy(); a.String() != b.String() {
				t.Fatalf("the second assignment %v is not the first %v sent again", b, a)
			}
			ttl := func(s sentAction) time.Duration {
				return s.a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration()
			}
			// The first reaches Envoy no earlier than it was sent, so its
			// TTL runs out no earlier than first.at + its TTL.
			if arrives, expires := stretch.at.Add(margin), first.at.Add(ttl(first)); !arrives.Before(expires) {
				t.Errorf("the stretch, sent at +%v, may reach Envoy at +%v, after the TTL it stretches ran out at +%v",
					stretch.at.Sub(windowStart), arrives.Sub(windowStart), expires.Sub(windowStart))
			}
			if ends := stretch.at.Add(ttl(stretch) + margin); ends.After(windowStart.Add(window)) {
				t.Errorf("the stretched TTL may end at +%v, after the window", ends.Sub(windowStart))
			}
			if ttl(stretch) < time.Second || stretch.at.Add(ttl(stretch)).Compare(first.at.Add(ttl(first))) <= 0 {
				t.Errorf("the stretch (TTL %v at +%v) ends no later than the first (TTL %v at +%v)",
					ttl(stretch), stretch.at.Sub(windowStart), ttl(first), first.at.Sub(windowStart))
			}
		})
	}
}

// watchActions opens a stream to rep, sends report, and returns what the
// server has sent on it so far, each action stamped with the clock when
// it arrived (the server's clock does not move while the test waits for
// it to settle, so that is when the server sent it).
func watchActions(t *testing.T, rep *replica, clock *rlqstest.Clock, report *rlqsv3.RateLimitQuotaUsageReports) func() []sentAction {
	t.Helper()
	s := openStream(t, rep.addr).s
	if err := s.Send(report); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acts []sentAction
	go func() {
		for {
			resp, err := s.Recv()
			if err != nil {
				return
			}
			now := clock.Now()
			mu.Lock()
			for _, a := range resp.GetBucketAction() {
				acts = append(acts, sentAction{at: now, a: a})
			}
			mu.Unlock()
		}
	}()
	return func() []sentAction {
		mu.Lock()
		defer mu.Unlock()
		return append([]sentAction(nil), acts...)
	}
}

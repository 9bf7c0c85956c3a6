package rlqs_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// windowStart is a fake time at the start of a 10 s window (and a minute).
var windowStart = time.Unix(1_800_000_000, 0)

// kindsRules has a rule of every kind RLQS tells apart.
const kindsRules = `
domain: d
descriptors:
  - key: window
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: sliding
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: sliding_window}
  - key: two
    rate_limits:
      - {unit: minute, requests_per_unit: 100}
      - {unit: hour, requests_per_unit: 1000}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: gcra}
  - key: exact
    lease: false
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: mixed
    rate_limits:
      - {unit: minute, requests_per_unit: 100}
      - {unit: hour, requests_per_unit: 1000, algorithm: sliding_log}
`

// exchange opens a stream to addr, sends reports and closes its side,
// returning every response and the status the stream ended with.
func exchange(t *testing.T, addr string, reports ...*rlqsv3.RateLimitQuotaUsageReports) ([]*rlqsv3.RateLimitQuotaResponse, error) {
	t.Helper()
	conn, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if err := s.Send(r); err != nil {
			break // the server ended the stream: Recv says why
		}
	}
	_ = s.CloseSend()
	var out []*rlqsv3.RateLimitQuotaResponse
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, resp)
	}
}

func usage(domain string, id map[string]string, allowed uint64) *rlqsv3.RateLimitQuotaUsageReports {
	return &rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &rlqsv3.BucketId{Bucket: id}, TimeElapsed: &durationpb.Duration{}, NumRequestsAllowed: allowed,
	}}}
}

// TestAssignments: the first report of a bucket gets what its rule says,
// and only what Envoy's filter applies: a token bucket charged in the
// counters (whole-second TTL ending before the window does; max_tokens
// and its refill until then at most what was charged), a blanket rule, or
// nothing.
func TestAssignments(t *testing.T) {
	clock := rlqstest.NewClock(windowStart.Add(15 * time.Second))
	st := memstore.New(memstore.WithClock(clock.Now))
	rep := startReplica(t, newRules(t, kindsRules), st, clock)
	tests := []struct {
		name   string
		domain string
		id     map[string]string
		want   string // token_bucket, allow_all, deny_all or "" (no response)
	}{
		{"fixed window", "d", map[string]string{"window": "a"}, "token_bucket"},
		{"sliding window", "d", map[string]string{"sliding": "a"}, "token_bucket"},
		{"two windows", "d", map[string]string{"two": "a"}, "token_bucket"},
		{"zero requests", "d", map[string]string{"zero": "a"}, "deny_all"},
		{"unlimited", "d", map[string]string{"free": "a"}, "allow_all"},
		{"shadow mode", "d", map[string]string{"shadow": "a"}, "allow_all"},
		{"no rule", "d", map[string]string{"nothing": "a"}, "allow_all"},
		{"unknown domain", "other", map[string]string{"window": "a"}, "allow_all"},
		{"a bucket algorithm", "d", map[string]string{"gcra": "a"}, ""},
		{"lease: false", "d", map[string]string{"exact": "a"}, ""},
		{"a limit that cannot lease", "d", map[string]string{"mixed": "a"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resps, err := exchange(t, rep.addr, usage(tt.domain, tt.id, 1))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if len(resps) != 0 {
					t.Fatalf("got %v, want no response", resps)
				}
				return
			}
			if len(resps) != 1 || len(resps[0].GetBucketAction()) != 1 {
				t.Fatalf("got %v, want one action", resps)
			}
			checkAction(t, resps[0].GetBucketAction()[0], tt.id, tt.want, clock.Now())
		})
	}
}

// checkAction checks one action's kind and shape at now (15 s into a
// minute window).
func checkAction(t *testing.T, a *rlqsv3.RateLimitQuotaResponse_BucketAction, id map[string]string, want string, now time.Time) {
	t.Helper()
	for k, v := range id {
		if a.GetBucketId().GetBucket()[k] != v || len(a.GetBucketId().GetBucket()) != len(id) {
			t.Fatalf("action for %v, want %v", a.GetBucketId().GetBucket(), id)
		}
	}
	qa := a.GetQuotaAssignmentAction()
	ttl := qa.GetAssignmentTimeToLive()
	if ttl.GetNanos() != 0 || ttl.GetSeconds() < 1 {
		t.Errorf("TTL %v, want whole seconds, at least one", ttl.AsDuration())
	}
	st := qa.GetRateLimitStrategy()
	got := "token_bucket"
	if st.GetTokenBucket() == nil {
		got = map[bool]string{true: "allow_all", false: "deny_all"}[st.GetBlanketRule().String() == "ALLOW_ALL"]
	}
	if got != want {
		t.Fatalf("got %s (%v), want %s", got, st, want)
	}
	if tb := st.GetTokenBucket(); tb != nil {
		fill := tb.GetFillInterval().GetSeconds()
		if tb.GetMaxTokens() < 1 || tb.GetTokensPerFill().GetValue() < 1 || fill < 1 {
			t.Errorf("token bucket %v: want max_tokens, tokens_per_fill and fill seconds of at least 1", tb)
		}
		// A first report has no rate: the grant is a quarter of the
		// limit (100), max_tokens and the refill over its life together.
		life := ttl.AsDuration() + rlqs.DefaultExpiryMargin
		if most := float64(tb.GetMaxTokens()) + float64(tb.GetTokensPerFill().GetValue())/float64(fill)*life.Seconds(); most > 25.5 {
			t.Errorf("token bucket %v lets Envoy admit up to %.1f over its TTL %v, want at most a quarter of 100", tb, most, ttl.AsDuration())
		}
		end := windowStart.Add(time.Minute)
		if exp := now.Add(life); exp.After(end) {
			t.Errorf("TTL %v from %v ends after the window (%v) with the expiry margin", ttl.AsDuration(), now, end)
		}
	}
}

// TestShutdownEndsStreams: Shutdown ends open streams with UNAVAILABLE at
// once, so that a graceful stop does not wait for them.
func TestShutdownEndsStreams(t *testing.T) {
	clock := rlqstest.NewClock(windowStart)
	st := memstore.New(memstore.WithClock(clock.Now))
	rep := startReplica(t, newRules(t, kindsRules), st, clock)
	conn, err := dial(rep.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(usage("d", map[string]string{"window": "a"}, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	rep.srv.Shutdown()
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("after Shutdown: %v, want Unavailable", err)
	}
	rep.grpc.GracefulStop() // returns: no stream is left
}

// TestNoConfig: before any configuration loads (a forced start), a bucket
// gets no assignment, and gets one once a configuration is in force.
func TestNoConfig(t *testing.T) {
	clock := rlqstest.NewClock(windowStart)
	st := memstore.New(memstore.WithClock(clock.Now))
	r := &rules{}
	rep := startReplica(t, r, st, clock)
	resps, err := exchange(t, rep.addr, usage("d", map[string]string{"window": "a"}, 1))
	if err != nil || len(resps) != 0 {
		t.Fatalf("without a configuration: %v, %v; want no response", resps, err)
	}
	r.set(t, kindsRules)
	resps, err = exchange(t, rep.addr, usage("d", map[string]string{"window": "a"}, 1))
	if err != nil || len(resps) != 1 {
		t.Fatalf("with one: %v, %v; want an assignment", resps, err)
	}
}

// TestDaemonCodec: on the daemon's gRPC server, whose codec is the rate
// limit service's guard codec, reports are checked before decoding too
// (the codec hands them their bytes): an oversized one is refused with
// INVALID_ARGUMENT, a good one answered.
func TestDaemonCodec(t *testing.T) {
	clock := rlqstest.NewClock(windowStart)
	st := memstore.New(memstore.WithClock(clock.Now))
	r := newRules(t, kindsRules)
	srv := rlqs.New(r, st, rlqs.WithClock(clock), rlqs.WithLimits(2, 0))
	gs := grpc.NewServer(ratelimit.New(r, st).GRPCServerOptions()...)
	srv.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	_, err = exchange(t, ln.Addr().String(), usage("d", map[string]string{"a": "1", "b": "2", "c": "3"}, 1))
	wantInvalid(t, err, "more than 2 entries")
	if resps, err := exchange(t, ln.Addr().String(), usage("d", map[string]string{"window": "a"}, 1)); err != nil || len(resps) != 1 {
		t.Fatalf("a good report: %v, %v", resps, err)
	}
}

package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// limitsConfig puts several limits on one descriptor (rate_limits): a
// small per-second and per-day pair stands for 10/second + 1000/day.
const limitsConfig = `
domain: l
descriptors:
  - key: user
    rate_limits:
      - {unit: second, requests_per_unit: 3, name: per_second}
      - {unit: day, requests_per_unit: 5, name: per_day}
  - key: team
    quota_mode: true
    rate_limits:
      - {unit: minute, requests_per_unit: 2, name: team_minute}
      - {unit: hour, requests_per_unit: 10, name: team_hour}
  - key: org
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1, name: org_hour}
  - key: shadow
    shadow_mode: true
    rate_limits:
      - {unit: second, requests_per_unit: 1, name: shadow_second}
      - {unit: day, requests_per_unit: 100, name: shadow_day}
  - key: special
    rate_limit: {unit: second, requests_per_unit: 100, replaces: [{name: per_second}]}
`

const (
	second = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
	day    = rlsv3.RateLimitResponse_RateLimit_DAY
)

// The 4th hit in a second is denied by per_second, without charging
// per_day; the 6th in a day by per_day. The status names the limit that
// decided: the one that denied, else the one with the least left.
func TestSeveralLimitsPerDescriptor(t *testing.T) {
	f := newFixture(t, limitsConfig)
	req := request("l", desc("user", "alice"))
	steps := []struct {
		advance time.Duration
		want    *rlsv3.RateLimitResponse
	}{
		{0, response(OK, limited(OK, 3, second, "per_second", 2, time.Second))},
		{0, response(OK, limited(OK, 3, second, "per_second", 1, time.Second))},
		// per_second 0 left, per_day 2 left: the least left decides.
		{0, response(OK, limited(OK, 3, second, "per_second", 0, time.Second))},
		{0, response(OVER, limited(OVER, 3, second, "per_second", 0, time.Second))},
		// A new second: per_day has 2 left (the denial charged nothing).
		{time.Second, response(OK, limited(OK, 5, day, "per_day", 1, 24*time.Hour-time.Second))},
		{0, response(OK, limited(OK, 5, day, "per_day", 0, 24*time.Hour-time.Second))},
		{time.Second, response(OVER, limited(OVER, 5, day, "per_day", 0, 24*time.Hour-2*time.Second))},
		{24 * time.Hour, response(OK, limited(OK, 3, second, "per_second", 2, time.Second))},
	}
	for i, st := range steps {
		f.clock.Advance(st.advance)
		assertResponse(t, i, f.call(t, req), st.want)
	}
}

func TestSeveralLimitsModes(t *testing.T) {
	t.Run("a quota descriptor is over when any of its limits is", func(t *testing.T) {
		f := newFixture(t, limitsConfig)
		team := request("l", desc("team", "t1"))
		for range 2 {
			f.call(t, team)
		}
		// team_minute is spent, team_hour has 8 left: the descriptor is
		// over, and it is the request's only quota alternative.
		if resp := f.call(t, team); resp.GetOverallCode() != OVER || resp.GetStatuses()[0].GetCurrentLimit().GetName() != "team_minute" {
			t.Fatalf("quota descriptor with a spent limit: %v", resp)
		}
		// Beside another quota descriptor with room, the request passes.
		both := request("l", desc("team", "t1"), desc("org", "o1"))
		resp := f.call(t, both)
		if resp.GetOverallCode() != OK || resp.GetStatuses()[0].GetCode() != OVER || resp.GetStatuses()[1].GetCode() != OK {
			t.Fatalf("quota descriptor over beside one with room: %v", resp)
		}
		// Now both alternatives are over.
		if resp := f.call(t, both); resp.GetOverallCode() != OVER {
			t.Fatalf("every quota alternative over: %v", resp)
		}
	})
	t.Run("a shadow descriptor answers OK past its limits", func(t *testing.T) {
		f := newFixture(t, limitsConfig)
		req := request("l", desc("shadow", "s"), desc("user", "u"))
		f.call(t, req)
		resp := f.call(t, req)
		want := response(OK, limited(OK, 1, second, "shadow_second", 0, time.Second), limited(OK, 3, second, "per_second", 1, time.Second))
		assertResponse(t, 1, resp, want)
	})
	t.Run("replaces drops the named limit only", func(t *testing.T) {
		f := newFixture(t, limitsConfig)
		req := request("l", desc("user", "bob"), desc("special", "x"))
		for i := range 5 {
			resp := f.call(t, req)
			// per_second is replaced: per_day alone limits bob.
			want := response(OK, limited(OK, 5, day, "per_day", uint32(4-i), 24*time.Hour), limited(OK, 100, second, "", uint32(99-i), time.Second))
			assertResponse(t, i, resp, want)
		}
	})
	t.Run("usage is recorded on every limit", func(t *testing.T) {
		f := newFixture(t, limitsConfig)
		resp := f.call(t, request("l", withHits(desc("user", "carol"), 4)))
		// 4 of 3 per second: over, and recorded on per_day too.
		assertResponse(t, 0, resp, response(OVER, limited(OVER, 3, second, "per_second", 0, time.Second)))
		f.clock.Advance(time.Second)
		assertResponse(t, 1, f.call(t, request("l", desc("user", "carol"))), response(OK, limited(OK, 5, day, "per_day", 0, 24*time.Hour-time.Second)))
	})
}

func TestSeveralLimitsHeadersAndMetadata(t *testing.T) {
	f := newFixture(t, limitsConfig,
		ratelimit.WithHeaders(ratelimit.Headers{Classic: true, Draft: true, RetryAfter: true}),
		ratelimit.WithDynamicMetadata(true))
	req := request("l", desc("user", "dave"), desc("none", "x"))
	f.clock.Advance(500 * time.Millisecond)
	for i := range 5 {
		if i == 2 {
			f.clock.Advance(time.Second)
		}
		f.call(t, req)
	}
	// At 1.6 s both limits are spent: per_second for 0.4 s, per_day until
	// the day ends, which decides.
	f.clock.Advance(100 * time.Millisecond)
	resp := f.call(t, req)
	h := headerMap(resp)
	want := map[string]string{
		"RateLimit-Policy": `"per_second";q=3;w=1, "per_day";q=5;w=86400`,
		"RateLimit":        `"per_day";r=0;t=86399`,
		"Retry-After":      "86399",
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
	got, _ := protojson.Marshal(resp.GetDynamicMetadata().GetFields()["descriptors"])
	wantMD := `[{"code":"OVER_LIMIT","entries":["user=dave"],"limitName":"per_day"},{"code":"OK","entries":["none=x"]}]`
	if !jsonEqual(t, string(got), wantMD) {
		t.Errorf("dynamic_metadata descriptors:\n got %s\nwant %s", got, wantMD)
	}
}

// countingStore counts Take calls: several limits per descriptor are still
// one store round trip.
type countingStore struct {
	store.Store
	takes, ops atomic.Int64
}

func (c *countingStore) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	c.takes.Add(1)
	c.ops.Add(int64(len(reqs)))
	return c.Store.Take(ctx, reqs)
}

func TestSeveralLimitsOneTake(t *testing.T) {
	f := newFixture(t, limitsConfig)
	cs := &countingStore{Store: f.store}
	svc := ratelimit.New(staticConfig{parse(t, limitsConfig)}, cs)
	req := request("l", desc("user", "eve"), desc("team", "t"), desc("shadow", "s"), desc("org", "o"))
	for range 3 {
		if _, err := svc.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if cs.takes.Load() != 3 || cs.ops.Load() != 3*7 {
		t.Fatalf("3 requests of 4 descriptors (7 limits): %d takes of %d ops, want 3 takes of 21", cs.takes.Load(), cs.ops.Load())
	}
}

// A descriptor with several limits counts once per request in the metrics,
// under its (detailed) stats key, as the limit that decided it.
func TestSeveralLimitsMetrics(t *testing.T) {
	m := metrics.New()
	f := newFixture(t, `
domain: l
descriptors:
  - key: user
    detailed_metric: true
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: day, requests_per_unit: 100}
`, ratelimit.WithObserver(m))
	for range 3 {
		f.call(t, request("l", desc("user", "a")))
	}
	for _, c := range []struct {
		metric string
		want   float64
	}{
		{"ratelimitd_total_hits_total", 3},
		{"ratelimitd_within_limit_total", 2},
		// The second hit leaves per_second (capacity 2) empty.
		{"ratelimitd_near_limit_total", 1},
		{"ratelimitd_over_limit_total", 1},
	} {
		if got := valueOf(t, m, c.metric, "l.user_a"); got != c.want {
			t.Errorf("%s{rule=\"l.user_a\"} = %v, want %v", c.metric, got, c.want)
		}
	}
}

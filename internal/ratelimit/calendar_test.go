package ratelimit_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

const monthConfig = `
domain: billing
descriptors:
  - key: plan
    rate_limit: {unit: month, requests_per_unit: 2}
`

// USE_CALENDAR_MONTH_RATE_LIMIT: a monthly limit, configured or a request's
// own, resets at the end of the UTC calendar month and says so in
// duration_until_reset; without it, at the end of the 30-day window
// counted from the epoch (2027-02-01 to 2027-03-03 here).
func TestCalendarMonths(t *testing.T) {
	mar1 := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	mar3 := time.Date(2027, 3, 3, 0, 0, 0, 0, time.UTC)
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	stores := map[string]func(clock *storetest.Clock) store.Store{
		"embedded": func(clock *storetest.Clock) store.Store { return memstore.New(memstore.WithClock(clock.Now)) },
		"redis": func(clock *storetest.Clock) store.Store {
			if err := admin.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			rs, err := redisstore.New(redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			return rs
		},
	}
	for _, tt := range []struct {
		name     string
		calendar bool
		end      time.Time
	}{
		{"calendar months", true, mar1},
		{"30-day windows", false, mar3},
	} {
		for backend, newStore := range stores {
			t.Run(tt.name+"/"+backend, func(t *testing.T) {
				calendarSteps(t, tt.calendar, tt.end, newStore)
			})
		}
	}
}

// calendarSteps fills a monthly limit on Feb 28, 2027 and steps to the end
// of its window (end), for the rule and for a request's own limit.
func calendarSteps(t *testing.T, calendar bool, end time.Time, newStore func(*storetest.Clock) store.Store) {
	feb28 := time.Date(2027, 2, 28, 12, 0, 0, 0, time.UTC)
	cfg, err := config.Parse([]config.File{{Name: "m.yaml", Data: []byte(monthConfig)}}, config.WithCalendarMonths(calendar))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(feb28)
	st := newStore(clock)
	t.Cleanup(func() { _ = st.Close() })
	f := &fixture{svc: ratelimit.New(staticConfig{cfg}, st), clock: clock, store: st}
	month := func(code rlsv3.RateLimitResponse_Code, remaining uint32, reset time.Duration) *rlsv3.RateLimitResponse {
		return response(code, limited(code, 2, rlsv3.RateLimitResponse_RateLimit_MONTH, "", remaining, reset))
	}
	next := 30 * 24 * time.Hour
	if calendar {
		next = 31 * 24 * time.Hour // March
	}
	for _, req := range []func() *rlsv3.RateLimitRequest{
		func() *rlsv3.RateLimitRequest { return request("billing", desc("plan", "pro")) },
		func() *rlsv3.RateLimitRequest {
			return request("billing", withOverride(desc("team", "a"), 2, typev3.RateLimitUnit_MONTH))
		},
	} {
		clock.Set(feb28)
		assertResponse(t, 0, f.call(t, req()), month(OK, 1, end.Sub(feb28)))
		assertResponse(t, 1, f.call(t, req()), month(OK, 0, end.Sub(feb28)))
		assertResponse(t, 2, f.call(t, req()), month(OVER, 0, end.Sub(feb28)))
		clock.Set(end.Add(-time.Second))
		assertResponse(t, 3, f.call(t, req()), month(OVER, 0, time.Second))
		clock.Set(end)
		assertResponse(t, 4, f.call(t, req()), month(OK, 1, next))
	}
}

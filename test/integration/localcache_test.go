package integration

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redisinfo"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

// scriptCalls is how many script calls (FCALL, EVALSHA, EVAL) Redis has served.
func scriptCalls(t *testing.T, addr string) int {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	return int(redisinfo.ScriptCalls(redistest.CommandStats(t, rdb)))
}

func TestLocalCacheSparesRedis(t *testing.T) {
	t.Parallel()
	// LOCAL_CACHE_MAX_AGE=0: the 20 calls below must not go back to Redis
	// however slowly this box runs them.
	svc, rds := startWithRedis(t, itConfig, "LOCAL_CACHE_SIZE_IN_BYTES=1048576", "LOCAL_CACHE_MAX_AGE=0")
	for _, tc := range []struct {
		value    string
		admitted int
	}{
		{"fixed", 3},  // 3 a day: cached until the day's window ends
		{"bucket", 4}, // burst 4, 1 an hour: cached until the next token
	} {
		t.Run(tc.value, func(t *testing.T) {
			req := request("it", desc("generic_key", tc.value))
			for i := range tc.admitted + 1 { // the last one denied by Redis
				resp, err := svc.call(req)
				if err != nil {
					t.Fatal(err)
				}
				if denied := resp.GetOverallCode() == over; denied != (i == tc.admitted) {
					t.Fatalf("call %d: %v", i, resp)
				}
			}
			before := scriptCalls(t, rds.Addr)
			for i := range 20 {
				resp, err := svc.call(req)
				if err != nil {
					t.Fatal(err)
				}
				st := resp.GetStatuses()[0]
				if resp.GetOverallCode() != over || st.GetLimitRemaining() != 0 || st.GetDurationUntilReset().AsDuration() <= 0 {
					t.Fatalf("cached call %d: %v", i, resp)
				}
			}
			if after := scriptCalls(t, rds.Addr); after != before {
				t.Fatalf("Redis served %d script calls for 20 requests over the limit, want 0 (local cache)", after-before)
			}
		})
	}
	// A key not over its limit still goes to Redis.
	before := scriptCalls(t, rds.Addr)
	if _, err := svc.call(request("it", desc("global", "other"))); err != nil {
		t.Fatal(err)
	}
	if after := scriptCalls(t, rds.Addr); after != before+1 {
		t.Fatalf("a key not over its limit: %d script calls, want 1", after-before)
	}
}

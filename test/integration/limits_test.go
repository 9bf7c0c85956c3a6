package integration

import (
	"fmt"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

// limitsConfig has a descriptor with two limits (rate_limits): 10 a second
// and 1000 a day, decided together.
const limitsConfig = `domain: limits
descriptors:
  - key: user
    rate_limits:
      - {unit: second, requests_per_unit: 10, name: per_second}
      - {unit: day, requests_per_unit: 1000, name: per_day}
  - key: team
    quota_mode: true
    rate_limits:
      - {unit: day, requests_per_unit: 2, name: team_day}
      - {unit: day, requests_per_unit: 50, unit_multiplier: 7, name: team_week, algorithm: sliding_window}
`

// startLimits runs ratelimitd with limitsConfig on be.
func startLimits(t *testing.T, be backend, env ...string) (*service, []*redistest.Server) {
	t.Helper()
	return startOn(t, be, limitsConfig, env...)
}

// decided checks one response: overall code, and the descriptor's code,
// the limit that decided it and what that limit has left.
func decided(t *testing.T, step string, resp *rlsv3.RateLimitResponse, err error, code rlsv3.RateLimitResponse_Code, name string, remaining uint32) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	st := resp.GetStatuses()[0]
	if resp.GetOverallCode() != code || st.GetCode() != code || st.GetCurrentLimit().GetName() != name || st.GetLimitRemaining() != remaining {
		t.Fatalf("%s: overall %v, status %v; want %v decided by %s with %d left", step, resp.GetOverallCode(), st, code, name, remaining)
	}
}

// A 10/second + 1000/day descriptor denies the 11th hit in a second (the
// day limit untouched by the denial) and the 1001st in a day. The day is
// filled with usage (the descriptor's own hits_addend, recorded on every
// limit past its limit) so the test does not wait 100 seconds.
func TestSeveralLimitsPerDescriptor(t *testing.T) {
	t.Parallel()
	for _, be := range []backend{memoryBackend, redisBackend, clusterBackend} {
		t.Run(be.name, func(t *testing.T) {
			svc, _ := startLimits(t, be)
			// Eleven calls must share one second; a machine that stalls past
			// its end gets another try with another user.
			var user *rlsv3.RateLimitRequest
			for try := 0; ; try++ {
				user = request("limits", desc("user", fmt.Sprintf("alice%d", try)))
				if secondOfHits(t, svc, user) {
					break
				}
				if try == 2 {
					t.Fatal("11 calls never fit in one second")
				}
			}
			roomInWindow(t, time.Second, 500*time.Millisecond)
			// 989 hits of usage: the day holds 10 + 989 = 999 (the denied
			// 11th hit charged nothing), per_second is over for this second.
			usage := request("limits", withHits(desc("user", user.GetDescriptors()[0].GetEntries()[0].GetValue()), 989))
			resp, err := svc.call(usage)
			decided(t, "usage of 989", resp, err, over, "per_second", 0)

			roomInWindow(t, time.Second, time.Second) // a new second: per_second starts again
			resp, err = svc.call(user)
			decided(t, "hit 1000 of the day", resp, err, ok, "per_day", 0)
			resp, err = svc.call(user)
			decided(t, "hit 1001 of the day", resp, err, over, "per_day", 0)
			if d := resp.GetStatuses()[0].GetDurationUntilReset().AsDuration(); d <= time.Second || d > 24*time.Hour {
				t.Fatalf("per_day resets in %s, want the rest of the day", d)
			}
		})
	}
}

// secondOfHits sends 11 hits in one wall-clock second: 10 admitted, the
// 11th denied by per_second. It reports false, having checked nothing,
// when the calls did not fit in the second.
func secondOfHits(t *testing.T, svc *service, user *rlsv3.RateLimitRequest) bool {
	t.Helper()
	roomInWindow(t, time.Second, 500*time.Millisecond)
	start := time.Now().Truncate(time.Second)
	resps := make([]*rlsv3.RateLimitResponse, 11)
	for i := range resps {
		var err error
		if resps[i], err = svc.call(user); err != nil {
			t.Fatalf("hit %d: %v", i+1, err)
		}
	}
	if !time.Now().Truncate(time.Second).Equal(start) {
		return false
	}
	for i, resp := range resps[:10] {
		// per_second has the least left throughout.
		decided(t, fmt.Sprintf("hit %d", i+1), resp, nil, ok, "per_second", uint32(9-i))
	}
	decided(t, "hit 11 in the second", resps[10], nil, over, "per_second", 0)
	if d := resps[10].GetStatuses()[0].GetDurationUntilReset().AsDuration(); d != time.Second {
		t.Fatalf("per_second resets in %s, want 1s (whole seconds, as envoyproxy)", d)
	}
	return true
}

// A quota descriptor is over when any of its limits is; two of them, each
// with two limits, are decided in one request.
func TestSeveralLimitsQuota(t *testing.T) {
	t.Parallel()
	for _, be := range []backend{memoryBackend, redisBackend, clusterBackend} {
		t.Run(be.name, func(t *testing.T) {
			svc, _ := startLimits(t, be)
			req := request("limits", desc("team", "a"), desc("team", "b"))
			want := []struct {
				overall rlsv3.RateLimitResponse_Code
				codes   []rlsv3.RateLimitResponse_Code
			}{
				{ok, []rlsv3.RateLimitResponse_Code{ok, ok}},
				{ok, []rlsv3.RateLimitResponse_Code{ok, ok}},
				// team_day is spent on both: every alternative is over, though
				// team_week has room on each.
				{over, []rlsv3.RateLimitResponse_Code{over, over}},
			}
			for i, w := range want {
				resp, err := svc.call(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.GetOverallCode() != w.overall || !equal(statusCodes(resp), w.codes) {
					t.Fatalf("call %d: %v %v, want %v %v", i+1, resp.GetOverallCode(), statusCodes(resp), w.overall, w.codes)
				}
			}
			// A new team still has room: the request passes, charging both.
			resp, err := svc.call(request("limits", desc("team", "a"), desc("team", "c")))
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetOverallCode() != ok || !equal(statusCodes(resp), []rlsv3.RateLimitResponse_Code{over, ok}) ||
				resp.GetStatuses()[0].GetCurrentLimit().GetName() != "team_day" {
				t.Fatalf("over beside a team with room: %v", resp)
			}
		})
	}
}

// Several limits per descriptor still cost one script call per request on
// Redis (INFO commandstats), and one per slot group on a Cluster.
func TestSeveralLimitsScriptCalls(t *testing.T) {
	t.Parallel()
	svc, rds := startLimits(t, redisBackend, "REDIS_PIPELINE_WINDOW=0")
	req := request("limits", desc("user", "u1"), desc("user", "u2"), desc("team", "t1"))
	warmUp(t, svc, "u1")
	before := scriptCalls(t, rds[0].Addr)
	const n = 20
	for range n {
		if _, err := svc.call(req); err != nil {
			t.Fatal(err)
		}
	}
	if got := scriptCalls(t, rds[0].Addr) - before; got != n {
		t.Fatalf("%d requests of 3 descriptors with 2 limits each: %d script calls, want %d", n, got, n)
	}
}

// warmUp checks user=value without charging it, so that the script is
// loaded on the master of its slot (its first call on a fresh Redis also
// counts the load's NOSCRIPT retry).
func warmUp(t *testing.T, svc *service, value string) {
	t.Helper()
	if _, err := svc.call(request("limits", withHits(desc("user", value), 0))); err != nil {
		t.Fatal(err)
	}
}

func TestSeveralLimitsClusterOneSlotPerDescriptor(t *testing.T) {
	t.Parallel()
	svc, nodes := startLimits(t, clusterBackend, "REDIS_PIPELINE_WINDOW=0")
	masters := redistest.Clients(t, nodes)
	warmUp(t, svc, "solo")
	before := clusterScriptCalls(t, masters)
	// per_second's key expires with its second: the calls and the key count
	// below must share one, or the count finds only per_day's key.
	roomInWindow(t, time.Second, 500*time.Millisecond)
	const n = 10
	for range n {
		if _, err := svc.call(request("limits", desc("user", "solo"))); err != nil {
			t.Fatal(err)
		}
	}
	// Both limits of a descriptor share its hash tag: one script.
	if got := clusterScriptCalls(t, masters) - before; got != n {
		t.Fatalf("%d one-descriptor requests with 2 limits: %d script calls, want %d", n, got, n)
	}
	used := 0
	for _, m := range masters {
		if keys := clusterKeyCount(t, m.Options().Addr); keys > 0 {
			used++
			if keys != 2 {
				t.Fatalf("master %s holds %d keys, want both limits' counters on one master", m.Options().Addr, keys)
			}
		}
	}
	if used != 1 {
		t.Fatalf("the descriptor's counters landed on %d masters, want 1", used)
	}
}

// userOn finds a value of user whose counters live on master i.
func userOn(t *testing.T, masters []*redis.Client, i int) string {
	t.Helper()
	return valueOn(t, masters, i, "u", func(v string) string { return counterKey("limits", "user", v, "fixed_window", time.Second) })
}

// A request whose descriptors' limits span masters is still all or
// nothing: the group that charged is undone when another denies.
func TestSeveralLimitsClusterAcrossSlots(t *testing.T) {
	t.Parallel()
	svc, nodes := startLimits(t, clusterBackend)
	masters := redistest.Clients(t, nodes)
	a, b := userOn(t, masters, 0), userOn(t, masters, 1)
	roomInWindow(t, time.Second, 500*time.Millisecond)
	// b's per_second is spent by usage.
	if _, err := svc.call(request("limits", withHits(desc("user", b), 10))); err != nil {
		t.Fatal(err)
	}
	resp, err := svc.call(request("limits", desc("user", a), desc("user", b)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOverallCode() != over || !equal(statusCodes(resp), []rlsv3.RateLimitResponse_Code{ok, over}) {
		t.Fatalf("a with room, b spent: %v", resp)
	}
	resp, err = svc.call(request("limits", withHits(desc("user", a), 0)))
	decided(t, "a after the denied request", resp, err, ok, "per_second", 10)
}

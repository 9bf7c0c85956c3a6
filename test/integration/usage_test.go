package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/xdstest"
)

// Issue 17: usage reports (descriptor hits_addend > 0, as Envoy Gateway's
// cost and AI Gateway's apply_on_stream_done send them) and checks
// (descriptor hits_addend 0) must get envoyproxy's answers. The rules are
// plain envoyproxy YAML so the same file would run unchanged on
// envoyproxy/ratelimit.
const llmConfig = `domain: llm
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 1000
  - key: team
    rate_limit:
      unit: hour
      requests_per_unit: 100000
`

// llmXDS is llmConfig as Envoy Gateway would push it over xDS.
func llmXDS() *rlsconfv3.RateLimitConfig {
	rule := func(key string, rpu uint32) *rlsconfv3.RateLimitDescriptor {
		return &rlsconfv3.RateLimitDescriptor{Key: key, RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: rpu}}
	}
	return &rlsconfv3.RateLimitConfig{Name: "llm", Domain: "llm", Descriptors: []*rlsconfv3.RateLimitDescriptor{rule("user", 1000), rule("team", 100000)}}
}

// startUsageXDS runs go-control-plane's ADS server over a snapshot cache
// that serves llmXDS to node envoy-ratelimit from the start, so the binary
// loads it as its initial config (no force start needed).
func startUsageXDS(t *testing.T) string {
	t.Helper()
	addr, cache := xdstest.Server(t)
	xdstest.SetRateLimitConfigs(t, cache, "envoy-ratelimit", "1", llmXDS())
	return addr
}

type descWant struct {
	code      rlsv3.RateLimitResponse_Code
	remaining uint32
}

// usageStep is one row of issue 17's table. hits is the descriptor-level
// hits_addend sent on every descriptor of the request; overall holds for the
// user alone too, since the user decides it whenever the team is sent.
type usageStep struct {
	name    string
	hits    uint64
	overall rlsv3.RateLimitResponse_Code
	user    descWant
	team    descWant
	// teamOnly sends (team) alone: the way to read the team counter
	// without touching the user's.
	teamOnly bool
}

// usageTable is envoyproxy's column: a report is always recorded, even past
// the limit (step 4), so the user stays over (step 5) and the team counter
// holds 900+200 (step 6).
var usageTable = []usageStep{
	{name: "1 check", hits: 0, overall: ok, user: descWant{ok, 1000}, team: descWant{ok, 100000}},
	{name: "2 report 900", hits: 900, overall: ok, user: descWant{ok, 100}, team: descWant{ok, 99100}},
	{name: "3 check", hits: 0, overall: ok, user: descWant{ok, 100}, team: descWant{ok, 99100}},
	{name: "4 report 200", hits: 200, overall: over, user: descWant{over, 0}, team: descWant{ok, 98900}},
	{name: "5 check", hits: 0, overall: over, user: descWant{over, 0}, team: descWant{ok, 98900}},
	{name: "6 team counter", hits: 0, teamOnly: true, overall: ok, team: descWant{ok, 98900}},
}

// runUsageTable runs usageTable for one user and, when team is not empty,
// one team.
func runUsageTable(t *testing.T, svc *service, user, team string) {
	t.Helper()
	roomInWindow(t, time.Hour, 10*time.Second)
	for _, st := range usageTable {
		var descs []*rlcommon.RateLimitDescriptor
		var want []descWant
		var limits []uint32
		if st.teamOnly {
			if team == "" {
				continue // one-descriptor mode never charged a team
			}
		} else {
			descs = append(descs, withHits(desc("user", user), st.hits))
			want = append(want, st.user)
			limits = append(limits, 1000)
		}
		if team != "" {
			descs = append(descs, withHits(desc("team", team), st.hits))
			want = append(want, st.team)
			limits = append(limits, 100000)
		}
		resp, err := svc.call(request("llm", descs...))
		if err != nil {
			t.Fatalf("step %s: %v", st.name, err)
		}
		got := make([]descWant, len(resp.GetStatuses()))
		for i, s := range resp.GetStatuses() {
			got[i] = descWant{s.GetCode(), s.GetLimitRemaining()}
			// The rule matched is the one configured, whatever the source.
			if i < len(limits) && s.GetCurrentLimit().GetRequestsPerUnit() != limits[i] {
				t.Errorf("step %s: status %d current_limit %v, want %d/hour", st.name, i, s.GetCurrentLimit(), limits[i])
			}
		}
		// Later steps still run after a wrong answer: which of them differ
		// tells a report that was not recorded from one judged wrongly.
		if resp.GetOverallCode() != st.overall || !equal(got, want) {
			t.Errorf("step %s (descriptor hits_addend %d): overall %v statuses %s, want overall %v statuses %s",
				st.name, st.hits, resp.GetOverallCode(), fmtWant(got), st.overall, fmtWant(want))
		}
	}
}

func fmtWant(ws []descWant) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%v/%d left", w.code, w.remaining)
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// valueApart returns prefix, or prefix-N for the first N, whose fixed-window
// counter of key lands on a master other than other's counter of otherKey;
// without a cluster (no masters), prefix.
func valueApart(t *testing.T, masters []*redis.Client, domain, key, prefix, otherKey, other string, window time.Duration) string {
	t.Helper()
	v := prefix
	if masters == nil {
		return v
	}
	keyOf := func(key, value string) string { return counterKey(domain, key, value, "fixed_window", window) }
	for n := 0; masterIndex(t, masters, keyOf(key, v)) == masterIndex(t, masters, keyOf(otherKey, other)); n++ {
		v = prefix + "-" + strconv.Itoa(n)
	}
	return v
}

// assertApart checks, by scanning every master's keys, that the counters of
// values a and b each exist on exactly one master and not the same one.
func assertApart(t *testing.T, masters []*redis.Client, a, b string) {
	t.Helper()
	ha, hb := holders(t, masters, a), holders(t, masters, b)
	if len(ha) != 1 || len(hb) != 1 || ha[0] == hb[0] {
		t.Fatalf("counter of %q on masters %v, of %q on masters %v; want one each, different", a, ha, b, hb)
	}
}

// holders lists the masters that hold a key whose hash tag ends with value.
func holders(t *testing.T, masters []*redis.Client, value string) []int {
	t.Helper()
	var out []int
	for i, m := range masters {
		keys, err := m.Keys(context.Background(), "*:"+value+"}*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// TestUsageReportTable runs issue 17's table against the built binary on
// every store, with the rules from files and from xDS, with the user
// descriptor alone and with user and team in one request.
func TestUsageReportTable(t *testing.T) {
	t.Parallel()
	xdsAddr := startUsageXDS(t)
	sources := []struct {
		name  string
		start func(t *testing.T, env []string) *service
	}{
		{"file", func(t *testing.T, env []string) *service {
			root, _ := newConfigRoot(t, map[string]string{"llm.yaml": llmConfig})
			return startService(t, root, slices.Concat(env, []string{"USE_STATSD=false"})...)
		}},
		{"xds", func(t *testing.T, env []string) *service {
			// Nothing is read from RUNTIME_ROOT with xDS; an empty one
			// proves the rules came from the snapshot.
			return startService(t, t.TempDir(), slices.Concat(env, []string{"USE_STATSD=false",
				"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL=" + xdsAddr, "CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit"})...)
		}},
	}
	for _, be := range []backend{memoryBackend, redisBackend, clusterBackend} {
		t.Run(be.name, func(t *testing.T) {
			// The Cluster's start dominates; the others run beside it.
			t.Parallel()
			env, nodes := be.start(t)
			masters := be.masters(t, nodes)
			for _, src := range sources {
				svc := src.start(t, env)
				for _, mode := range []string{"user", "user+team"} {
					t.Run(src.name+"/"+mode, func(t *testing.T) {
						// Per-sub-test values: no two sub-tests share a counter.
						label := be.name + "-" + src.name + "-" + strings.ReplaceAll(mode, "+", "-")
						user, team := "u-"+label, ""
						if mode == "user+team" {
							// The point on a Cluster: a report whose counters live
							// on different masters is still recorded on both.
							team = valueApart(t, masters, "llm", "team", "t-"+label, "user", user, time.Hour)
						}
						runUsageTable(t, svc, user, team)
						if masters != nil && team != "" {
							assertApart(t, masters, user, team)
						}
					})
				}
			}
		})
	}
}

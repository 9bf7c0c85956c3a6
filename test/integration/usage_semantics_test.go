package integration

import (
	"slices"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
)

// usageSemanticsConfig holds the rules of the documented edge cases; it is a
// separate domain so the table's domain stays exactly envoyproxy's example.
const usageSemanticsConfig = `domain: usage
descriptors:
  - key: shadow
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: path
    value: /health
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: tight
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: wide
    rate_limit:
      unit: hour
      requests_per_unit: 100
`

// TestUsageSemantics covers the three documented cases around the table:
// shadow rules are counted as usual, a counter named twice is judged on its
// running total, and a denied request charges its admissions nothing
// (ratelimitd's all-or-nothing difference from envoyproxy). On a Cluster the
// denied request's two counters live on different masters, so the charged
// master's share must be undone.
func TestUsageSemantics(t *testing.T) {
	t.Parallel()
	for _, be := range []backend{memoryBackend, redisBackend, clusterBackend} {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			env, nodes := be.start(t)
			masters := be.masters(t, nodes)
			root, _ := newConfigRoot(t, map[string]string{"usage.yaml": usageSemanticsConfig})
			svc := startService(t, root, slices.Concat(env, []string{"USE_STATSD=false"})...)

			shadow := "s-" + be.name
			tight := "a-" + be.name
			wide := valueApart(t, masters, "usage", "wide", "b-"+be.name, "tight", tight, time.Hour)
			for _, tc := range usageSemanticsCases(shadow, tight, wide, masters) {
				t.Run(tc.name, func(t *testing.T) { runUsageCase(t, svc, tc) })
			}
		})
	}
}

type usageCall struct {
	req     *rlsv3.RateLimitRequest
	overall rlsv3.RateLimitResponse_Code
	want    []descWant
}

type usageCase struct {
	name   string
	window time.Duration
	calls  []usageCall
	after  func(t *testing.T)
}

func withRequestHits(r *rlsv3.RateLimitRequest, hits uint32) *rlsv3.RateLimitRequest {
	r.HitsAddend = hits
	return r
}

// usageSemanticsCases are TestUsageSemantics' sequences on the values of a
// backend (masters is nil but on a Cluster).
func usageSemanticsCases(shadow, tight, wide string, masters []*redis.Client) []usageCase {
	return []usageCase{
		{
			// envoyproxy counts a shadow rule past its limit and
			// answers OK: the 5 hits leave nothing, and so does the next.
			name: "shadow rule counted as usual", window: time.Minute,
			calls: []usageCall{
				{withRequestHits(request("usage", desc("shadow", shadow)), 5), ok, []descWant{{ok, 0}}},
				{withRequestHits(request("usage", desc("shadow", shadow)), 1), ok, []descWant{{ok, 0}}},
			},
		},
		{
			// The report's 1699 is on the counter before the second
			// descriptor is judged, so both are over.
			name: "same counter twice judged on its running total", window: time.Hour,
			calls: []usageCall{
				{request("usage", withHits(desc("path", "/health"), 1699), desc("path", "/health")), over, []descWant{{over, 0}, {over, 0}}},
				// The report was recorded although the request was denied.
				{request("usage", withHits(desc("path", "/health"), 0)), over, []descWant{{over, 0}}},
			},
		},
		{
			// envoyproxy would charge wide for a request tight denied;
			// ratelimitd leaves it at 3 and answers with that count,
			// in either order and for any request hits_addend.
			name: "denied request leaves the other counter unchanged", window: time.Hour,
			calls: []usageCall{
				{request("usage", desc("tight", tight)), ok, []descWant{{ok, 0}}},
				{withRequestHits(request("usage", desc("wide", wide)), 3), ok, []descWant{{ok, 97}}},
				{request("usage", desc("tight", tight), desc("wide", wide)), over, []descWant{{over, 0}, {ok, 97}}},
				{withRequestHits(request("usage", desc("wide", wide), desc("tight", tight)), 5), over, []descWant{{ok, 97}, {over, 0}}},
				// Whatever was reported, the count is back to 3.
				{request("usage", withHits(desc("wide", wide), 0)), ok, []descWant{{ok, 97}}},
			},
			after: func(t *testing.T) {
				if masters != nil {
					assertApart(t, masters, tight, wide)
				}
			},
		},
	}
}

// runUsageCase makes tc's calls within one of its windows.
func runUsageCase(t *testing.T, svc *service, tc usageCase) {
	roomInWindow(t, tc.window, 3*time.Second)
	for i, c := range tc.calls {
		resp, err := svc.call(c.req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		got := make([]descWant, len(resp.GetStatuses()))
		for j, s := range resp.GetStatuses() {
			got[j] = descWant{s.GetCode(), s.GetLimitRemaining()}
		}
		// Later calls still run: they show whether a wrong answer also
		// left a wrong count behind.
		want := c.want
		if resp.GetOverallCode() != c.overall || !equal(got, want) {
			t.Errorf("call %d %v (request hits_addend %d): overall %v statuses %s, want overall %v statuses %s",
				i, c.req.GetDescriptors(), c.req.GetHitsAddend(), resp.GetOverallCode(), fmtWant(got), c.overall, fmtWant(want))
		}
	}
	if tc.after != nil {
		tc.after(t)
	}
}

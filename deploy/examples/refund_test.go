package examples

import (
	"strconv"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// TestTokensEstimateThenRefund: the estimate-then-refund example is a valid
// Envoy config whose request-time entries charge every budget the estimate
// (usage), and whose stream-done entries name the same descriptors twice:
// a refund (is_negative_hits) of the unused tokens and a report of the
// tokens beyond the estimate, both written by the Lua filter before the
// rate limit filter, from the same estimate; every descriptor finds its
// budget in the rules.
func TestTokensEstimateThenRefund(t *testing.T) {
	const file = "tokens/envoy-refund/envoy.yaml"
	_, hcm := envoyBootstrap(t, file)
	var (
		lua    luav3.Lua
		rlf    ratelimitfilterv3.RateLimit
		luaPos = -1
		rlPos  = -1
	)
	for i, f := range hcm.GetHttpFilters() {
		switch f.GetName() {
		case "envoy.filters.http.lua":
			luaPos = i
			if err := f.GetTypedConfig().UnmarshalTo(&lua); err != nil {
				t.Fatal(err)
			}
		case "envoy.filters.http.ratelimit":
			rlPos = i
			if err := f.GetTypedConfig().UnmarshalTo(&rlf); err != nil {
				t.Fatal(err)
			}
		}
	}
	if luaPos < 0 || rlPos < luaPos {
		t.Fatalf("filters: want the Lua filter before the rate limit filter, so that a 429 passes through it")
	}
	code := lua.GetDefaultSourceCode().GetInlineString()

	route := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0]
	var perRoute ratelimitfilterv3.RateLimitPerRoute
	if err := route.GetTypedPerFilterConfig()["envoy.filters.http.ratelimit"].UnmarshalTo(&perRoute); err != nil {
		t.Fatal(err)
	}
	estimate, streamDone := splitByPhase(perRoute.GetRateLimits())
	var refunds, overruns []*routev3.RateLimit
	for _, rl := range streamDone {
		if rl.GetHitsAddend().GetIsNegativeHits() {
			refunds = append(refunds, rl)
		} else {
			overruns = append(overruns, rl)
		}
	}
	sameActions(t, estimate, refunds)
	sameActions(t, estimate, overruns)
	for _, rl := range estimate {
		n := rl.GetHitsAddend().GetNumber().GetValue()
		if n == 0 || !strings.Contains(code, "local estimate = "+strconv.FormatUint(n, 10)+"\n") {
			t.Errorf("request-time entry %v: want the Lua filter's estimate as its hits_addend number", rl)
		}
	}
	for kind, rls := range map[string][]*routev3.RateLimit{"unused_tokens": refunds, "overrun_tokens": overruns} {
		for _, rl := range rls {
			if ns, key := reportSource(t, rl); ns != "llm.usage" || key != kind || !strings.Contains(code, `"llm.usage", "`+kind+`"`) {
				t.Errorf("stream-done entry %v: want %s, which the Lua filter writes", rl, kind)
			}
		}
	}

	cfg, err := config.LoadDir("tokens/envoy/ratelimit")
	if err != nil {
		t.Fatal(err)
	}
	req := request{headers: map[string]string{"x-user-id": "alice", "x-model": "gpt-4o"}}
	want := map[string]string{"user_id=alice": "100000", "model=gpt-4o": "30000"}
	for _, rls := range [][]*routev3.RateLimit{estimate, refunds, overruns} {
		checkMatches(t, cfg, rlf.GetDomain(), rls, req, want)
	}
}

package examples

import (
	"regexp"
	"strings"
	"testing"

	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	rlqfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// TestEnvoyRLQS: the rate_limit_quota filter example decodes strictly and
// validates; its RLQS cluster speaks HTTP/2; every bucket has the
// recommended DENY_ALL behaviors (the exact bound); every request builds
// a bucket id (Envoy lets a request whose id it cannot build through,
// unreported: a custom value whose header is missing), one of its own
// for an API request without a tenant; and the ids match the rules
// expected in its rate limit config, as ratelimitd's RLQS server matches
// them.
func TestEnvoyRLQS(t *testing.T) {
	const file = "envoy-rlqs/envoy.yaml"
	bs, hcm := envoyBootstrap(t, file)
	var rlq rlqfilterv3.RateLimitQuotaFilterConfig
	if err := hcm.GetHttpFilters()[0].GetTypedConfig().UnmarshalTo(&rlq); err != nil {
		t.Fatal(err)
	}
	cluster := rlq.GetRlqsServer().GetEnvoyGrpc().GetClusterName()
	http2 := false
	for _, c := range bs.GetStaticResources().GetClusters() {
		if c.GetName() == cluster {
			http2 = len(c.GetTypedExtensionProtocolOptions()) > 0
		}
	}
	if !http2 {
		t.Errorf("RLQS cluster %q missing or not HTTP/2", cluster)
	}
	cfg, err := config.LoadDir("envoy-rlqs/ratelimit")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    uint32 // requests_per_unit of the bucket's rule
	}{
		{"an API request of a tenant", map[string]string{":path": "/api/items", "x-tenant": "acme"}, 600},
		{"an API request without a tenant", map[string]string{":path": "/api/items"}, 6000},
		{"an API request with an empty tenant", map[string]string{":path": "/api/items", "x-tenant": ""}, 6000},
		{"anything else", map[string]string{":path": "/index.html", "x-tenant": "acme"}, 1000},
		{"anything else, without a tenant", map[string]string{":path": "/index.html"}, 1000},
	} {
		settings := bucketSettings(t, rlq.GetBucketMatchers(), tc.headers)
		checkRecommended(t, tc.name, settings)
		id, ok := bucketID(t, settings, tc.headers)
		if !ok {
			t.Errorf("%s: no bucket id can be built (a custom value's header is missing): Envoy lets the request through unreported", tc.name)
			continue
		}
		rule, _ := cfg.MatchBucket(rlq.GetDomain(), id)
		switch {
		case rule == nil:
			t.Errorf("%s: bucket %v matches no rule", tc.name, id)
		case rule.RequestsPerUnit != tc.want:
			t.Errorf("%s: bucket %v matches %s (%d), want %d", tc.name, id, rule.StatKey, rule.RequestsPerUnit, tc.want)
		}
	}
}

// bucketSettings evaluates the filter's matcher for a request: the first
// matcher of its list whose predicate holds, else on_no_match.
func bucketSettings(t *testing.T, m *xdsmatcherv3.Matcher, headers map[string]string) *rlqfilterv3.RateLimitQuotaBucketSettings {
	t.Helper()
	action := m.GetOnNoMatch().GetAction()
	for _, fm := range m.GetMatcherList().GetMatchers() {
		if holds(t, fm.GetPredicate(), headers) {
			action = fm.GetOnMatch().GetAction()
			break
		}
	}
	var s rlqfilterv3.RateLimitQuotaBucketSettings
	if err := action.GetTypedConfig().UnmarshalTo(&s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// holds evaluates a predicate: a single one on a request header (false
// when the header is missing, as Envoy's matcher has no data then), or
// all or any of a list.
func holds(t *testing.T, p *xdsmatcherv3.Matcher_MatcherList_Predicate, headers map[string]string) bool {
	t.Helper()
	switch {
	case p.GetSinglePredicate() != nil:
		sp := p.GetSinglePredicate()
		v, ok := headerInput(t, sp.GetInput().GetTypedConfig(), headers)
		return ok && stringMatches(t, sp.GetValueMatch(), v)
	case p.GetAndMatcher() != nil:
		for _, q := range p.GetAndMatcher().GetPredicate() {
			if !holds(t, q, headers) {
				return false
			}
		}
		return true
	case p.GetOrMatcher() != nil:
		for _, q := range p.GetOrMatcher().GetPredicate() {
			if holds(t, q, headers) {
				return true
			}
		}
		return false
	default:
		t.Fatalf("predicate %v is not evaluated here: extend holds", p)
		return false
	}
}

// headerInput is an HttpRequestHeaderMatchInput's value for the request,
// and whether it carries the header.
func headerInput(t *testing.T, input *anypb.Any, headers map[string]string) (string, bool) {
	t.Helper()
	var h matcherv3.HttpRequestHeaderMatchInput
	if err := input.UnmarshalTo(&h); err != nil {
		t.Fatalf("only request header inputs are evaluated here: %v", err)
	}
	v, ok := headers[h.GetHeaderName()]
	return v, ok
}

func stringMatches(t *testing.T, m *xdsmatcherv3.StringMatcher, v string) bool {
	t.Helper()
	switch p := m.GetMatchPattern().(type) {
	case *xdsmatcherv3.StringMatcher_Exact:
		return v == p.Exact
	case *xdsmatcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(v, p.Prefix)
	case *xdsmatcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(v, p.Suffix)
	case *xdsmatcherv3.StringMatcher_SafeRegex:
		// Envoy's safe_regex matches the whole value (RE2, as Go's).
		return regexp.MustCompile(`^(?:` + p.SafeRegex.GetRegex() + `)$`).MatchString(v)
	default:
		t.Fatalf("string matcher %T is not evaluated here: extend stringMatches", p)
		return false
	}
}

// bucketID builds the bucket id as the filter does: string values as
// they are, custom values read from the request; false when a custom
// value's input is missing (the filter builds no id then).
func bucketID(t *testing.T, s *rlqfilterv3.RateLimitQuotaBucketSettings, headers map[string]string) (map[string]string, bool) {
	t.Helper()
	id := map[string]string{}
	for k, b := range s.GetBucketIdBuilder().GetBucketIdBuilder() {
		v := b.GetStringValue()
		if c := b.GetCustomValue(); c != nil {
			var ok bool
			if v, ok = headerInput(t, c.GetTypedConfig(), headers); !ok {
				return nil, false
			}
		}
		id[k] = v
	}
	return id, true
}

// checkRecommended: DENY_ALL without an assignment and after one expired,
// the settings that make the fleet's bound the limit itself.
func checkRecommended(t *testing.T, name string, s *rlqfilterv3.RateLimitQuotaBucketSettings) {
	t.Helper()
	deny := func(st *typev3.RateLimitStrategy) bool {
		return st.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL && st.GetTokenBucket() == nil
	}
	if !deny(s.GetNoAssignmentBehavior().GetFallbackRateLimit()) {
		t.Errorf("%s: no_assignment_behavior %v, want DENY_ALL", name, s.GetNoAssignmentBehavior())
	}
	if !deny(s.GetExpiredAssignmentBehavior().GetFallbackRateLimit()) || s.GetExpiredAssignmentBehavior().GetExpiredAssignmentBehaviorTimeout().GetSeconds() < 60 {
		t.Errorf("%s: expired_assignment_behavior %v, want DENY_ALL for a while", name, s.GetExpiredAssignmentBehavior())
	}
}

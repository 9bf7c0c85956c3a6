package examples

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	headertometadatav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// splitByPhase separates the entries Envoy sends when the request arrives
// from those it sends when the stream ends.
func splitByPhase(rls []*routev3.RateLimit) (request, streamDone []*routev3.RateLimit) {
	for _, rl := range rls {
		if rl.GetApplyOnStreamDone() {
			streamDone = append(streamDone, rl)
		} else {
			request = append(request, rl)
		}
	}
	return request, streamDone
}

// sameActions: a usage report must name exactly the descriptors its check
// read, or the tokens land on a counter no request is checked against.
func sameActions(t *testing.T, request, streamDone []*routev3.RateLimit) {
	t.Helper()
	if len(request) != len(streamDone) {
		t.Fatalf("%d request-time entries but %d stream-done entries", len(request), len(streamDone))
	}
	for i := range request {
		a, b := request[i].GetActions(), streamDone[i].GetActions()
		if len(a) != len(b) {
			t.Errorf("entry %d: the report's actions differ from the check's", i)
			continue
		}
		for j := range a {
			if !proto.Equal(a[j], b[j]) {
				t.Errorf("entry %d action %d: report %v, check %v", i, j, b[j], a[j])
			}
		}
	}
}

var dynamicMetadataFormat = regexp.MustCompile(`^%DYNAMIC_METADATA\(([^:()]+):([^:()]+)\)%$`)

// reportSource returns the metadata namespace and key a stream-done entry
// charges, failing unless the entry is one.
func reportSource(t *testing.T, rl *routev3.RateLimit) (string, string) {
	t.Helper()
	m := dynamicMetadataFormat.FindStringSubmatch(rl.GetHitsAddend().GetFormat())
	if m == nil || rl.GetHitsAddend().GetNumber() != nil {
		t.Fatalf("stream-done entry %v: want hits_addend.format %%DYNAMIC_METADATA(ns:key)%%", rl)
	}
	return m[1], m[2]
}

// checkMatches walks each request's descriptors through the matcher: every
// descriptor must hit a rule with the limit (and quota mode) expected.
func checkMatches(t *testing.T, cfg *config.Config, domain string, rls []*routev3.RateLimit, req request, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, d := range descriptors(t, rls, req) {
		rule := cfg.Match(domain, d)
		if rule == nil {
			t.Errorf("descriptor {%s} matches no rule of domain %q", entriesString(d), domain)
			continue
		}
		v := fmt.Sprint(rule.RequestsPerUnit)
		if rule.QuotaMode {
			v += " quota"
		}
		got[entriesString(d)] = v
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("limits %v, want %v", got, want)
	}
}

// TestTokensPlainEnvoy: the plain Envoy token example is a valid Envoy config
// whose per-route rate limits check every budget with hits_addend 0 and report
// the same descriptors at stream end with the tokens a filter wrote to dynamic
// metadata, and whose descriptors all find their budget in the rules.
func TestTokensPlainEnvoy(t *testing.T) {
	const file = "tokens/envoy/envoy.yaml"
	_, hcm := envoyBootstrap(t, file)
	var (
		rlf     ratelimitfilterv3.RateLimit
		h2m     headertometadatav3.Config
		order   []string
		written = map[string]bool{} // "namespace:key" the response rules fill
	)
	for _, f := range hcm.GetHttpFilters() {
		order = append(order, f.GetName())
		switch f.GetName() {
		case "envoy.filters.http.ratelimit":
			if err := f.GetTypedConfig().UnmarshalTo(&rlf); err != nil {
				t.Fatal(err)
			}
		case "envoy.filters.http.header_to_metadata":
			if err := f.GetTypedConfig().UnmarshalTo(&h2m); err != nil {
				t.Fatal(err)
			}
			for _, r := range h2m.GetResponseRules() {
				kv := r.GetOnHeaderPresent()
				written[kv.GetMetadataNamespace()+":"+kv.GetKey()] = true
			}
		}
	}
	if order[len(order)-1] != "envoy.filters.http.router" || rlf.GetDomain() == "" {
		t.Fatalf("filters %v: want the rate limit filter and the router last", order)
	}

	route := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0]
	var perRoute ratelimitfilterv3.RateLimitPerRoute
	if err := route.GetTypedPerFilterConfig()["envoy.filters.http.ratelimit"].UnmarshalTo(&perRoute); err != nil {
		t.Fatalf("route's RateLimitPerRoute: %v", err)
	}
	check, report := splitByPhase(perRoute.GetRateLimits())
	sameActions(t, check, report)
	for _, rl := range check {
		if rl.GetHitsAddend().GetNumber() == nil || rl.GetHitsAddend().GetNumber().GetValue() != 0 {
			t.Errorf("request-time entry %v: want hits_addend {number: 0}, a check that charges nothing", rl)
		}
	}
	for _, rl := range report {
		ns, key := reportSource(t, rl)
		if !written[ns+":"+key] {
			t.Errorf("stream-done entry charges %s:%s, which no response rule writes (%v)", ns, key, written)
		}
	}

	cfg, err := config.LoadDir("tokens/envoy/ratelimit")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.HasDomain(rlf.GetDomain()) {
		t.Fatalf("the filter's domain %q is not in the rules (%v)", rlf.GetDomain(), cfg.Domains())
	}
	req := request{headers: map[string]string{"x-user-id": "alice", "x-team-id": "search", "x-model": "gpt-4o"}}
	want := map[string]string{"user_id=alice": "100000", "team_id=search": "2000000", "model=gpt-4o": "30000"}
	checkMatches(t, cfg, rlf.GetDomain(), check, req, want)
	checkMatches(t, cfg, rlf.GetDomain(), report, req, want)
	checkMatches(t, cfg, rlf.GetDomain(), check, request{headers: map[string]string{"x-user-id": "bob", "x-model": "mistral-large"}},
		map[string]string{"user_id=bob": "100000", "model=mistral-large": "100000"})
}

// TestTokensEnvoyGateway: the BackendTrafficPolicy matches the strict schema,
// now with cost, and every rule is a token budget: checked at request time
// with cost 0, charged from AI Gateway's metadata at stream end.
func TestTokensEnvoyGateway(t *testing.T) {
	const file = "tokens/envoy-gateway/backendtrafficpolicy.yaml"
	btp := compile(t, "envoy-gateway/schema/backendtrafficpolicy.schema.json")
	validateSchema(t, btp, file, read(t, file))

	var policy struct {
		Spec struct {
			RateLimit struct {
				Global struct {
					Rules []struct {
						Cost struct {
							Request struct {
								From   string  `json:"from"`
								Number *uint64 `json:"number"`
							} `json:"request"`
							Response struct {
								From     string `json:"from"`
								Metadata struct {
									Namespace string `json:"namespace"`
									Key       string `json:"key"`
								} `json:"metadata"`
							} `json:"response"`
						} `json:"cost"`
					} `json:"rules"`
				} `json:"global"`
			} `json:"rateLimit"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(read(t, file), &policy); err != nil {
		t.Fatal(err)
	}
	rules := policy.Spec.RateLimit.Global.Rules
	if len(rules) == 0 {
		t.Fatal("no rules")
	}
	for i, r := range rules {
		c := r.Cost
		if c.Request.From != "Number" || c.Request.Number == nil || *c.Request.Number != 0 {
			t.Errorf("rule %d: cost.request %+v, want a check (from Number, number 0)", i, c.Request)
		}
		if c.Response.From != "Metadata" || c.Response.Metadata.Namespace != "io.envoy.ai_gateway" || !strings.HasPrefix(c.Response.Metadata.Key, "llm_") {
			t.Errorf("rule %d: cost.response %+v, want AI Gateway's token metadata", i, c.Response)
		}
	}

	// The cost schema is as strict as the CRD: a misspelling, a source the
	// API does not have, a missing from, and number next to metadata all fail.
	doc := string(read(t, file))
	for name, bad := range map[string]string{
		"misspelt metadata":    strings.Replace(doc, "metadata:\n                namespace", "metdata:\n                namespace", 1),
		"unknown source":       strings.Replace(doc, "from: Metadata", "from: Header", 1),
		"no from":              strings.Replace(doc, "from: Number\n", "", 1),
		"number with metadata": strings.Replace(doc, "from: Metadata\n", "from: Metadata\n              number: 5\n", 1),
		"negative number":      strings.Replace(doc, "number: 0", "number: -1", 1),
	} {
		if bad == doc {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		rejects(t, btp, name, bad)
	}
}

// TestTokensAIGateway: the Deployment for AI Gateway's QuotaPolicy decodes
// strictly, its Service is what AI Gateway's Envoy cluster dials, and the
// descriptors AI Gateway's route actions send find their quota rules.
func TestTokensAIGateway(t *testing.T) {
	var (
		deploy *appsv1.Deployment
		svc    *corev1.Service
	)
	for _, o := range kubeObjects(t, "tokens/ai-gateway/ratelimitd.yaml") {
		switch o := o.(type) {
		case *appsv1.Deployment:
			deploy = o
		case *corev1.Service:
			svc = o
		}
	}
	if deploy == nil || svc == nil {
		t.Fatal("tokens/ai-gateway/ratelimitd.yaml lacks the Deployment or the Service")
	}
	// AI Gateway's controller points its rate limit cluster at
	// envoy-ai-gateway-ratelimit.envoy-gateway-system, port 8081.
	if svc.Name != "envoy-ai-gateway-ratelimit" || svc.Namespace != "envoy-gateway-system" || svc.Spec.Ports[0].Port != 8081 {
		t.Errorf("Service %s/%s:%d, want envoy-gateway-system/envoy-ai-gateway-ratelimit:8081", svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
	}
	for k, v := range svc.Spec.Selector {
		if deploy.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the pods (%v)", k, v, deploy.Spec.Template.Labels)
		}
	}
	if sc := deploy.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Error("the Deployment does not run as a non-root user")
	}
	env := map[string]string{}
	for _, e := range deploy.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["CONFIG_GRPC_XDS_NODE_ID"] != "envoy-ai-gateway-ratelimit" || !strings.HasSuffix(env["CONFIG_GRPC_XDS_SERVER_URL"], ":18002") {
		t.Errorf("xDS settings %v: want node envoy-ai-gateway-ratelimit on the controller's :18002", env)
	}

	var perRoute ratelimitfilterv3.RateLimitPerRoute
	const file = "tokens/ai-gateway/route-rate-limits.yaml"
	decodeProto(t, file, read(t, file), &perRoute)
	validate(t, file, &perRoute)
	check, report := splitByPhase(perRoute.GetRateLimits())
	sameActions(t, check, report)
	if ns, key := reportSource(t, report[0]); ns != "io.envoy.ai_gateway" || key != "llm_total_token" {
		t.Errorf("report charges %s:%s, want io.envoy.ai_gateway:llm_total_token", ns, key)
	}

	cfg, err := config.LoadDir("tokens/ai-gateway/ratelimit")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.HasDomain(perRoute.GetDomain()) {
		t.Fatalf("domain %q is not in the rules (%v)", perRoute.GetDomain(), cfg.Domains())
	}
	requestFor := func(backend, model string) request {
		return request{metadata: map[string]map[string]string{"io.envoy.ai_gateway": {
			"ai_service_backend_name": backend, "model_name_override": model, "llm_total_token": "1234",
		}}}
	}
	for _, tc := range []struct {
		backend, model, want string
	}{
		{"default/openai", "gpt-4o", "200000 quota"},
		{"default/openai", "gpt-4o-mini", "1000000 quota"},
		{"default/openai", "o3", "5000000 quota"}, // the serviceQuota
		{"default/azure-openai", "gpt-4o", "500000 quota"},
	} {
		want := map[string]string{"backend_name=" + tc.backend + ",model_name_override=" + tc.model: tc.want}
		checkMatches(t, cfg, perRoute.GetDomain(), check, requestFor(tc.backend, tc.model), want)
		checkMatches(t, cfg, perRoute.GetDomain(), report, requestFor(tc.backend, tc.model), want)
	}
}

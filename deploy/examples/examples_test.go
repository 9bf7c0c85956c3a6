// Package examples checks the deployment examples docs/deploying.md walks through:
// Kubernetes objects decode strictly into their API types, Envoy configs
// decode into go-control-plane's protos and pass ValidateAll, Envoy
// Gateway's resources match strict schemas, and the descriptors the
// examples' route actions produce match rules of the examples' rate limit
// configs in ratelimitd's own matcher.
package examples

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// docs splits a multi-document YAML file, dropping empty documents.
func docs(data []byte) [][]byte {
	var out [][]byte
	for _, d := range docSep.Split(string(data), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// kubeObjects decodes every document of file strictly (unknown fields are
// errors) into its k8s.io/api type, by apiVersion and kind.
func kubeObjects(t *testing.T, file string) []any {
	t.Helper()
	var out []any
	for i, doc := range docs(read(t, file)) {
		var tm typeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s doc %d: %v", file, i, err)
		}
		var obj any
		switch tm.APIVersion + "/" + tm.Kind {
		case "apps/v1/Deployment":
			obj = &appsv1.Deployment{}
		case "v1/Service":
			obj = &corev1.Service{}
		case "v1/ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1/Namespace":
			obj = &corev1.Namespace{}
		case "networking.k8s.io/v1/NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "kustomize.config.k8s.io/v1beta1/Kustomization":
			continue
		default:
			t.Fatalf("%s doc %d: no API type known for %s %s", file, i, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s doc %d (%s): %v", file, i, tm.Kind, err)
			continue
		}
		out = append(out, obj)
	}
	return out
}

// decodeProto decodes YAML into m with protojson: unknown fields and
// unregistered Any types are errors.
func decodeProto(t *testing.T, what string, doc []byte, m proto.Message) {
	t.Helper()
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := protojson.Unmarshal(js, m); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

type validator interface{ ValidateAll() error }

// validate runs m's protoc-gen-validate rules, then those of every Any it
// holds (ValidateAll does not look inside an Any).
func validate(t *testing.T, what string, m proto.Message) {
	t.Helper()
	if v, ok := m.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	} else {
		t.Errorf("%s: %T has no ValidateAll", what, m)
	}
	forEachAny(m, func(a *anypb.Any) {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Errorf("%s: %s: %v", what, a.GetTypeUrl(), err)
			return
		}
		validate(t, what+" > "+a.GetTypeUrl(), inner)
	})
}

// forEachAny finds the Any messages in m (not inside other Anys).
func forEachAny(m proto.Message, fn func(*anypb.Any)) {
	var walk func(proto.Message)
	walk = func(m proto.Message) {
		if a, ok := m.(*anypb.Any); ok {
			fn(a)
			return
		}
		r := m.ProtoReflect()
		r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				l := v.List()
				for i := range l.Len() {
					walk(l.Get(i).Message().Interface())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message().Interface())
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message().Interface())
			}
			return true
		})
	}
	walk(m)
}

// request is what the route actions of the examples read: the remote
// address, request headers and dynamic metadata (namespace -> key -> value).
type request struct {
	remote   string
	headers  map[string]string
	metadata map[string]map[string]string
}

// descriptors evaluates Envoy's rate_limits actions for req: each
// rate_limit yields one descriptor unless a header or metadata value it
// needs is absent.
func descriptors(t *testing.T, rls []*routev3.RateLimit, req request) [][]config.Entry {
	t.Helper()
	var out [][]config.Entry
next:
	for _, rl := range rls {
		var entries []config.Entry
		for _, a := range rl.GetActions() {
			switch spec := a.GetActionSpecifier().(type) {
			case *routev3.RateLimit_Action_RemoteAddress_:
				entries = append(entries, config.Entry{Key: "remote_address", Value: req.remote})
			case *routev3.RateLimit_Action_RequestHeaders_:
				v, ok := req.headers[spec.RequestHeaders.GetHeaderName()]
				switch {
				case ok:
					entries = append(entries, config.Entry{Key: spec.RequestHeaders.GetDescriptorKey(), Value: v})
				case spec.RequestHeaders.GetSkipIfAbsent():
				default:
					continue next
				}
			case *routev3.RateLimit_Action_Metadata:
				mk := spec.Metadata.GetMetadataKey()
				if len(mk.GetPath()) != 1 {
					t.Fatalf("metadata action %v: only one-segment paths are evaluated here", mk)
				}
				v, ok := req.metadata[mk.GetKey()][mk.GetPath()[0].GetKey()]
				if !ok {
					continue next
				}
				entries = append(entries, config.Entry{Key: spec.Metadata.GetDescriptorKey(), Value: v})
			case *routev3.RateLimit_Action_GenericKey_:
				key := spec.GenericKey.GetDescriptorKey()
				if key == "" {
					key = "generic_key"
				}
				entries = append(entries, config.Entry{Key: key, Value: spec.GenericKey.GetDescriptorValue()})
			default:
				t.Fatalf("action %T is not evaluated by this test: extend descriptors()", spec)
			}
		}
		if len(entries) > 0 {
			out = append(out, entries)
		}
	}
	return out
}

func entriesString(es []config.Entry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Key + "=" + e.Value
	}
	return strings.Join(parts, ",")
}

// checkLimits walks each request's descriptors through the matcher: every
// descriptor must hit a rule, with the requests_per_unit expected.
func checkLimits(t *testing.T, cfg *config.Config, domain string, rls []*routev3.RateLimit, cases []limitCase) {
	t.Helper()
	if !cfg.HasDomain(domain) {
		t.Fatalf("the filter's domain %q is not in the rate limit config (%v)", domain, cfg.Domains())
	}
	for _, tc := range cases {
		got := map[string]uint32{}
		for _, d := range descriptors(t, rls, tc.req) {
			rule := cfg.Match(domain, d)
			if rule == nil {
				t.Errorf("%s: descriptor {%s} matches no rule", tc.name, entriesString(d))
				continue
			}
			got[entriesString(d)] = rule.RequestsPerUnit
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: limits %v, want %v", tc.name, got, tc.want)
		}
	}
}

type limitCase struct {
	name string
	req  request
	want map[string]uint32 // descriptor -> requests_per_unit
}

func TestPlainEnvoy(t *testing.T) {
	bs, hcm := envoyBootstrap(t, "envoy/envoy.yaml")
	var rlf ratelimitfilterv3.RateLimit
	if err := hcm.GetHttpFilters()[0].GetTypedConfig().UnmarshalTo(&rlf); err != nil {
		t.Fatal(err)
	}
	cluster := rlf.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	found := false
	for _, c := range bs.GetStaticResources().GetClusters() {
		if c.GetName() == cluster {
			found = len(c.GetTypedExtensionProtocolOptions()) > 0 // HTTP/2: gRPC needs it
		}
	}
	if !found {
		t.Errorf("rate limit cluster %q missing or not HTTP/2", cluster)
	}

	cfg, err := config.LoadDir("envoy/ratelimit")
	if err != nil {
		t.Fatal(err)
	}
	checkLimits(t, cfg, rlf.GetDomain(), hcm.GetRouteConfig().GetVirtualHosts()[0].GetRateLimits(), []limitCase{
		{"login with a user", request{remote: "203.0.113.7", headers: map[string]string{":path": "/login", "x-user-id": "alice"}},
			map[string]uint32{"remote_address=203.0.113.7": 100, "path=/login": 5, "user_id=alice": 3}},
		{"anonymous", request{remote: "198.51.100.1", headers: map[string]string{":path": "/api/items"}},
			map[string]uint32{"remote_address=198.51.100.1": 100, "path=/api/items": 50}},
	})
}

// istioPatches finds the HTTP_FILTER and the VIRTUAL_HOST patch among the
// EnvoyFilters of path, each decoded strictly.
func istioPatches(t *testing.T, path string) (filter, vhost *networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch) {
	t.Helper()
	for i, doc := range docs(read(t, path)) {
		var head struct {
			typeMeta
			Metadata json.RawMessage `json:"metadata"`
			Spec     json.RawMessage `json:"spec"`
		}
		if err := yaml.UnmarshalStrict(doc, &head); err != nil {
			t.Fatalf("envoyfilter doc %d: %v", i, err)
		}
		if head.APIVersion != "networking.istio.io/v1alpha3" || head.Kind != "EnvoyFilter" {
			t.Fatalf("envoyfilter doc %d: %s %s", i, head.APIVersion, head.Kind)
		}
		var meta struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		}
		if err := json.Unmarshal(head.Metadata, &meta); err != nil || meta.Name == "" {
			t.Fatalf("envoyfilter doc %d metadata: %v", i, err)
		}
		var ef networkingv1alpha3.EnvoyFilter
		if err := protojson.Unmarshal(head.Spec, &ef); err != nil {
			t.Fatalf("EnvoyFilter %s: %v", meta.Name, err)
		}
		for _, p := range ef.GetConfigPatches() {
			switch p.GetApplyTo() {
			case networkingv1alpha3.EnvoyFilter_HTTP_FILTER:
				filter = p
			case networkingv1alpha3.EnvoyFilter_VIRTUAL_HOST:
				vhost = p
			}
		}
	}
	if filter == nil || vhost == nil {
		t.Fatal("want an HTTP_FILTER patch and a VIRTUAL_HOST patch")
	}
	return filter, vhost
}

func TestIstio(t *testing.T) {
	objs := kubeObjects(t, "istio/ratelimitd.yaml")
	var (
		cm       *corev1.ConfigMap
		svc      *corev1.Service
		deploy   *appsv1.Deployment
		hasRedis bool
	)
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			cm = o
		case *corev1.Service:
			if o.Name == "ratelimit" {
				svc = o
			}
		case *appsv1.Deployment:
			if o.Name == "ratelimit" {
				deploy = o
			} else if o.Name == "redis" {
				hasRedis = true
			}
		}
	}
	if cm == nil || svc == nil || deploy == nil || !hasRedis {
		t.Fatal("istio/ratelimitd.yaml lacks the ConfigMap, the ratelimit Service and Deployment or redis")
	}
	checkDeployment(t, deploy, cm)

	filter, vhost := istioPatches(t, "istio/envoyfilter.yaml")

	var hf hcmv3.HttpFilter
	patchInto(t, "HTTP_FILTER patch", filter.GetPatch().GetValue(), &hf)
	validate(t, "HTTP_FILTER patch", &hf)
	var rlf ratelimitfilterv3.RateLimit
	if err := hf.GetTypedConfig().UnmarshalTo(&rlf); err != nil {
		t.Fatal(err)
	}
	port := 0
	for _, p := range svc.Spec.Ports {
		if p.Name == "grpc-port" {
			port = int(p.Port)
		}
	}
	wantCluster := fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", port, svc.Name, svc.Namespace)
	if got := rlf.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != wantCluster {
		t.Errorf("filter's cluster %q, want the Service's %q", got, wantCluster)
	}

	var vh routev3.VirtualHost // a MERGE patch: a partial VirtualHost
	patchInto(t, "VIRTUAL_HOST patch", vhost.GetPatch().GetValue(), &vh)
	for i, rl := range vh.GetRateLimits() {
		validate(t, fmt.Sprintf("rate_limits[%d]", i), rl)
	}
	cfg, err := config.Parse([]config.File{{Name: "ratelimit-config/config.yaml", Data: []byte(cm.Data["config.yaml"])}})
	if err != nil {
		t.Fatal(err)
	}
	checkLimits(t, cfg, rlf.GetDomain(), vh.GetRateLimits(), []limitCase{
		{"product page", request{remote: "10.0.0.1", headers: map[string]string{":path": "/productpage"}}, map[string]uint32{"PATH=/productpage": 1}},
		{"any other path", request{remote: "10.0.0.1", headers: map[string]string{":path": "/reviews"}}, map[string]uint32{"PATH=/reviews": 100}},
	})
}

// patchInto decodes an EnvoyFilter patch value (a Struct) into m strictly.
func patchInto(t *testing.T, what string, v interface{ MarshalJSON() ([]byte, error) }, m proto.Message) {
	t.Helper()
	js, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(js, m); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// checkDeployment: the ConfigMap is mounted where RUNTIME_* say the rules
// are, and the pod runs as the image's non-root user.
func checkDeployment(t *testing.T, d *appsv1.Deployment, cm *corev1.ConfigMap) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	app := env["RUNTIME_APPDIRECTORY"]
	if app == "" {
		app = "config"
	}
	want := filepath.Join(env["RUNTIME_ROOT"], env["RUNTIME_SUBDIRECTORY"], app)
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name && m.MountPath == want {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("ConfigMap %s is not mounted at %s (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config)", cm.Name, want)
	}
	if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("Deployment %s does not run as a non-root user", d.Name)
	}
}

func compile(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.NewCompiler().Compile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s
}

func validateSchema(t *testing.T, s *jsonschema.Schema, what string, doc []byte) {
	t.Helper()
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

func TestEnvoyGateway(t *testing.T) {
	var cm *corev1.ConfigMap
	for _, o := range kubeObjects(t, "envoy-gateway/envoy-gateway-config.yaml") {
		cm, _ = o.(*corev1.ConfigMap)
	}
	if cm == nil {
		t.Fatal("no ConfigMap")
	}
	egDoc := []byte(cm.Data["envoy-gateway.yaml"])
	validateSchema(t, compile(t, "envoy-gateway/schema/envoygateway.schema.json"), "envoy-gateway.yaml", egDoc)
	var eg struct {
		Provider struct {
			Kubernetes struct {
				RateLimitDeployment struct {
					Container struct {
						Image string `json:"image"`
					} `json:"container"`
				} `json:"rateLimitDeployment"`
			} `json:"kubernetes"`
		} `json:"provider"`
		RateLimit struct {
			Backend struct {
				Redis struct {
					URL string `json:"url"`
				} `json:"redis"`
			} `json:"backend"`
		} `json:"rateLimit"`
	}
	if err := yaml.Unmarshal(egDoc, &eg); err != nil {
		t.Fatal(err)
	}
	if img := eg.Provider.Kubernetes.RateLimitDeployment.Container.Image; !strings.Contains(img, "ratelimitd") {
		t.Errorf("rateLimitDeployment image %q is not ratelimitd's", img)
	}

	// The Redis URL names the Service redis.yaml creates.
	var redisHost string
	for _, o := range kubeObjects(t, "envoy-gateway/redis.yaml") {
		if s, ok := o.(*corev1.Service); ok {
			redisHost = fmt.Sprintf("%s.%s.svc.cluster.local:%d", s.Name, s.Namespace, s.Spec.Ports[0].Port)
		}
	}
	if eg.RateLimit.Backend.Redis.URL != redisHost {
		t.Errorf("rateLimit.backend.redis.url %q, want redis.yaml's Service %q", eg.RateLimit.Backend.Redis.URL, redisHost)
	}

	btp := compile(t, "envoy-gateway/schema/backendtrafficpolicy.schema.json")
	validateSchema(t, btp, "backendtrafficpolicy.yaml", read(t, "envoy-gateway/backendtrafficpolicy.yaml"))

	// The schemas are strict: a misspelt field fails.
	for name, bad := range map[string]string{
		"misspelt field": strings.Replace(string(read(t, "envoy-gateway/backendtrafficpolicy.yaml")), "clientSelectors", "clientSelector", 1),
		"bad unit":       strings.Replace(string(read(t, "envoy-gateway/backendtrafficpolicy.yaml")), "unit: Hour", "unit: hour", 1),
	} {
		rejects(t, btp, name, bad)
	}
}

// rejects fails t unless schema rejects the YAML document bad.
func rejects(t *testing.T, schema *jsonschema.Schema, name, bad string) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if schema.Validate(inst) == nil {
		t.Errorf("%s: the schema accepts it", name)
	}
}

// TestPlainKubernetes decodes deploy/k8s strictly and checks the
// ConfigMap is where the Deployment's settings look.
func TestPlainKubernetes(t *testing.T) {
	var (
		cm *corev1.ConfigMap
		d  *appsv1.Deployment
	)
	for _, f := range []string{"configmap.yaml", "deployment.yaml", "service.yaml", "networkpolicy.yaml", "kustomization.yaml"} {
		for _, o := range kubeObjects(t, filepath.Join("..", "k8s", f)) {
			switch o := o.(type) {
			case *corev1.ConfigMap:
				cm = o
			case *appsv1.Deployment:
				d = o
			}
		}
	}
	if cm == nil || d == nil {
		t.Fatal("deploy/k8s lacks its ConfigMap or Deployment")
	}
	checkDeployment(t, d, cm)
}

// envoyBootstrap decodes the Envoy config file strictly and validates it,
// and returns it with its first listener's HTTP connection manager.
func envoyBootstrap(t *testing.T, file string) (*bootstrapv3.Bootstrap, *hcmv3.HttpConnectionManager) {
	t.Helper()
	bs := &bootstrapv3.Bootstrap{}
	decodeProto(t, file, read(t, file), bs)
	validate(t, file, bs)
	hcm := &hcmv3.HttpConnectionManager{}
	if err := bs.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	return bs, hcm
}

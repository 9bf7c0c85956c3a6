// Package examples checks the deployment examples docs/deploying.md walks through:
// Kubernetes objects decode strictly into their API types, Envoy configs
// decode into go-control-plane's protos and pass ValidateAll, Envoy
// Gateway's resources match strict schemas, and the descriptors the
// examples' route actions produce match rules of the examples' rate limit
// configs in ratelimitd's own matcher.
package examples

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
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

package examples

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

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

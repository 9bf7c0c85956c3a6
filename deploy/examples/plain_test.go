package examples

import (
	"path/filepath"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

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

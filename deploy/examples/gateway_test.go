package examples

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

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

package daemon

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/internal/xdstest"
)

// The values Envoy AI Gateway's controller serves its QuotaPolicy rules
// with (internal/ratelimit/runner and translator in envoyproxy/ai-gateway).
const (
	aiGatewayNodeID = "envoy-ai-gateway-ratelimit"
	aiGatewayDomain = "ai-gateway-quota"
)

// aiGatewayDeployment reads the container of the documented Deployment:
// the guide's env block is an excerpt of this file (deploy/examples checks
// that), so parsing it here parses what operators copy.
func aiGatewayDeployment(t *testing.T) (env map[string]string, args []string) {
	t.Helper()
	data, err := os.ReadFile("../../deploy/examples/tokens/ai-gateway/ratelimitd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		var d struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Args []string `yaml:"args"`
							Env  []struct {
								Name  string `yaml:"name"`
								Value string `yaml:"value"`
							} `yaml:"env"`
						} `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		env = map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		return env, c.Args
	}
	t.Fatal("no Deployment in ratelimitd.yaml")
	return nil, nil
}

// TestAIGatewayDeploymentSettings: the documented env block points ratelimitd
// at AI Gateway's xDS server by settings alone, plaintext, and parses
// without a warning.
func TestAIGatewayDeploymentSettings(t *testing.T) {
	env, args := aiGatewayDeployment(t)
	s, err := parseSettings(args, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	x := s.XDS
	if !x.Enabled || x.NodeID != aiGatewayNodeID || x.UseTLS || x.ServerURL != "ai-gateway-controller.envoy-ai-gateway-system.svc.cluster.local:18002" {
		t.Errorf("xDS settings %+v", x)
	}
	if !s.ForceStartWithoutConfig || s.Backend != backendRedis || !s.Headers.Classic {
		t.Errorf("settings %+v: want force start, Redis and the RateLimit-* headers", s)
	}
	if len(s.Warnings) > 0 {
		t.Errorf("warnings %q", s.Warnings)
	}
}

// startAIGatewayXDS serves rules the way AI Gateway's controller does: a
// plaintext gRPC server with a non-ADS snapshot cache keyed by node id.
func startAIGatewayXDS(t *testing.T, descriptors []*rlsconfv3.RateLimitDescriptor) string {
	t.Helper()
	addr, cache := xdstest.Server(t)
	xdstest.SetRateLimitConfigs(t, cache, aiGatewayNodeID, "1",
		&rlsconfv3.RateLimitConfig{Name: aiGatewayDomain, Domain: aiGatewayDomain, Descriptors: descriptors})
	return addr
}

// quotaModel is one backend_name -> model_name_override branch as AI
// Gateway's translator builds it, quota_mode set on the wire.
func quotaModel(backend, model string, limit uint32) *rlsconfv3.RateLimitDescriptor {
	leaf := &rlsconfv3.RateLimitDescriptor{
		Key: "model_name_override", Value: model,
		RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: limit},
	}
	// RateLimitDescriptor.quota_mode is field 7 in the proto AI Gateway
	// builds with; the go-control-plane release this module uses predates
	// it, so it is written as the bytes AI Gateway sends.
	leaf.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 1))
	return &rlsconfv3.RateLimitDescriptor{Key: "backend_name", Value: backend, Descriptors: []*rlsconfv3.RateLimitDescriptor{leaf}}
}

// startAIGatewayApp runs ratelimitd with the documented env block, its
// server URL pointed at addr and the embedded store in place of Redis.
func startAIGatewayApp(t *testing.T, addr string) rlsv3.RateLimitServiceClient {
	t.Helper()
	env, _ := aiGatewayDeployment(t)
	env["CONFIG_GRPC_XDS_SERVER_URL"] = addr
	delete(env, "REDIS_URL")
	env["XDS_CLIENT_BACKOFF_INITIAL_INTERVAL"], env["XDS_CLIENT_BACKOFF_MAX_INTERVAL"] = "20ms", "100ms"
	a, _, _, _ := startApp(t, env)
	conn := dial(t, a.grpcLn.Addr().String())
	hc := healthpb.NewHealthClient(conn)
	testkit.WaitFor(t, 5*time.Second, "the first config from the xDS server", func() bool {
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	return rlsv3.NewRateLimitServiceClient(conn)
}

func quotaDescriptor(backend, model string) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
		{Key: "backend_name", Value: backend}, {Key: "model_name_override", Value: model},
	}}
}

// TestAIGatewayXDS: with the documented settings, ratelimitd takes AI
// Gateway's quota rules from a server like AI Gateway's and decides the
// descriptors its request-time rate limit entry sends.
func TestAIGatewayXDS(t *testing.T) {
	addr := startAIGatewayXDS(t, []*rlsconfv3.RateLimitDescriptor{quotaModel("default/openai", "gpt-4o", 200000)})
	rls := startAIGatewayApp(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain: aiGatewayDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{quotaDescriptor("default/openai", "gpt-4o")},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.GetStatuses()[0]
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || st.GetCurrentLimit().GetRequestsPerUnit() != 200000 ||
		st.GetCurrentLimit().GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR || st.GetLimitRemaining() != 199999 {
		t.Fatalf("response %v", resp)
	}
}

// TestAIGatewayQuotaModeOverXDS: AI Gateway marks every quota rule
// quota_mode, so a call naming two backends' quotas is OVER_LIMIT only when
// both are spent.
func TestAIGatewayQuotaModeOverXDS(t *testing.T) {
	addr := startAIGatewayXDS(t, []*rlsconfv3.RateLimitDescriptor{
		quotaModel("default/openai", "gpt-4o", 0), // spent
		quotaModel("default/azure-openai", "gpt-4o", 100),
	})
	rls := startAIGatewayApp(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: aiGatewayDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		quotaDescriptor("default/openai", "gpt-4o"), quotaDescriptor("default/azure-openai", "gpt-4o"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	codes := []string{resp.GetOverallCode().String()}
	for _, st := range resp.GetStatuses() {
		codes = append(codes, st.GetCode().String())
	}
	if got := strings.Join(codes, " "); got != "OK OVER_LIMIT OK" {
		t.Fatalf("overall and statuses %q, want \"OK OVER_LIMIT OK\"", got)
	}
}

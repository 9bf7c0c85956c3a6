package service_test

import (
	"context"
	"fmt"
	"log"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// A Go program that decides rate limits in its own process: rules in
// envoyproxy's YAML, counters in memory, no daemon. Serving the same Service
// to Envoy takes a gRPC server built with GRPCServerOptions and RegisterGRPC.
func Example() {
	rules, err := service.ParseRules(service.RulesFile{Name: "api.yaml", YAML: []byte(`
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: hour # an hour, so the three calls below all but never straddle a window end
      requests_per_unit: 2
`)})
	if err != nil {
		log.Fatal(err)
	}
	st := memstore.New()
	defer st.Close()
	svc, err := service.New(rules, st)
	if err != nil {
		log.Fatal(err)
	}

	req := &rlsv3.RateLimitRequest{
		Domain: "api",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "alice"}},
		}},
	}
	for range 3 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(resp.GetOverallCode(), resp.GetStatuses()[0].GetLimitRemaining())
	}
	// Output:
	// OK 1
	// OK 0
	// OVER_LIMIT 0
}

package integration

import (
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// startOTLP serves an OTLP/HTTP traces receiver until t ends.
func startOTLP(t *testing.T) (*otlpCollector, string) {
	t.Helper()
	recv := &otlpCollector{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return recv, ln.Addr().String()
}

// parentsOf is the set of parent span IDs of the spans named name in trace.
func (c *otlpCollector) parentsOf(trace, name string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	parents := map[string]bool{}
	for _, sp := range c.spans {
		if hex.EncodeToString(sp.traceID) == trace && sp.name == name {
			parents[hex.EncodeToString(sp.parentID)] = true
		}
	}
	return parents
}

type otlpSpan struct {
	name              string
	traceID, parentID []byte
}

// otlpCollector is an OTLP/HTTP receiver: protobuf bodies at /v1/traces.
type otlpCollector struct {
	mu    sync.Mutex
	spans []otlpSpan
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.spans = append(c.spans, otlpSpan{name: sp.GetName(), traceID: sp.GetTraceId(), parentID: sp.GetParentSpanId()})
			}
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// envoyGatewayMapping is a statsd_exporter mapping like the one Envoy
// Gateway mounts at /etc/statsd-exporter/conf.yaml: one- and two-segment
// keys by glob (timer_type, deprecated, still accepted), the service-wide
// stats, and everything else dropped.
const envoyGatewayMapping = `mappings:
  - match: "ratelimit.service.rate_limit.*.*.over_limit"
    name: "ratelimit_service_rate_limit_over_limit"
    timer_type: "histogram"
    labels: {domain: "$1", key1: "$2"}
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "ratelimit_service_rate_limit_total_hits"
    timer_type: "histogram"
    labels: {domain: "$1", key1: "$2"}
  - match: "ratelimit.service.rate_limit.*.*.*.near_limit"
    name: "ratelimit_service_rate_limit_near_limit"
    timer_type: "histogram"
    labels: {domain: "$1", key1: "$2", key2: "$3"}
  - match: "ratelimit.service.rate_limit.*.*.*.over_limit"
    name: "ratelimit_service_rate_limit_over_limit"
    timer_type: "histogram"
    labels: {domain: "$1", key1: "$2", key2: "$3"}
  - match: "ratelimit.service.rate_limit.*.*.*.total_hits"
    name: "ratelimit_service_rate_limit_total_hits"
    timer_type: "histogram"
    labels: {domain: "$1", key1: "$2", key2: "$3"}
  - match: "ratelimit.service.rate_limit.*.*.*.within_limit"
    name: "ratelimit_service_rate_limit_within_limit"
    timer_type: "histogram"
    labels: {domain: "$1", key1: "$2", key2: "$3"}
  - match: "ratelimit.service.call.should_rate_limit.*"
    name: "ratelimit_service_should_rate_limit_error"
    match_metric_type: counter
    labels: {err_type: "$1"}
  - match: "ratelimit_server.*.total_requests"
    name: "ratelimit_service_total_requests"
    match_metric_type: counter
    labels: {grpc_method: "$1"}
  - match: "ratelimit_server.*.response_time"
    name: "ratelimit_service_response_time_seconds"
    timer_type: histogram
    labels: {grpc_method: "$1"}
  - match: "ratelimit.service.config_load_success"
    name: "ratelimit_service_config_load_success"
    match_metric_type: counter
  - match: "."
    match_type: "regex"
    action: "drop"
    name: "dropped"
`

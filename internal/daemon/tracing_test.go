package daemon

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/ratelimitd/ratelimitd/internal/tracing"
)

// otlpReceiver collects what an OTLP exporter sends, over HTTP (protobuf
// bodies at /v1/traces) or gRPC (TraceService/Export), as a collector
// would receive it.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
	res   []map[string]string // resource attributes, per span
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		attrs := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans = append(r.spans, sp)
				r.res = append(r.res, attrs)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, _ := r.Export(req.Context(), &msg)
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// startReceiver listens on loopback and returns the endpoint URL to put in
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
func startReceiver(t *testing.T, protocol string) (*otlpReceiver, string) {
	t.Helper()
	r := &otlpReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if protocol == "grpc" {
		g := grpc.NewServer()
		coltracepb.RegisterTraceServiceServer(g, r)
		go func() { _ = g.Serve(ln) }()
		t.Cleanup(g.Stop)
		return r, "http://" + ln.Addr().String()
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r, "http://" + ln.Addr().String() + "/v1/traces"
}

func TestTracingExportsSpansWithEnvoysParent(t *testing.T) {
	for _, protocol := range []string{"http", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			recv, endpoint := startReceiver(t, protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
			a, _, _, stop := startApp(t, map[string]string{
				"TRACING_ENABLED": "true", "TRACING_EXPORTER_PROTOCOL": protocol,
				"TRACING_SERVICE_NAME": "ratelimit", "TRACING_SERVICE_NAMESPACE": "envoy-gateway-system",
				"TRACING_SERVICE_INSTANCE_ID": "pod-1", "TRACING_SAMPLING_RATE": "1.0",
			})
			conn := dial(t, a.grpcLn.Addr().String())
			rls := rlsv3.NewRateLimitServiceClient(conn)
			req := &rlsv3.RateLimitRequest{Domain: "app", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
				Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}},
			}}}
			const (
				sampledTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
				unsampledTrace = "0af7651916cd43dd8448eb211c80319c"
				envoySpan      = "00f067aa0ba902b7"
			)
			for _, tp := range []string{"00-" + sampledTrace + "-" + envoySpan + "-01", "00-" + unsampledTrace + "-" + envoySpan + "-00"} {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", tp)
				if _, err := rls.ShouldRateLimit(ctx, req); err != nil {
					t.Fatal(err)
				}
				if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
					t.Fatal(err)
				}
				cancel()
			}
			// Shutting down flushes the batch.
			if err := stop(); err != nil {
				t.Fatal(err)
			}

			recv.mu.Lock()
			defer recv.mu.Unlock()
			byName := map[string]*tracepb.Span{}
			for i, sp := range recv.spans {
				trace := hex.EncodeToString(sp.GetTraceId())
				if trace != sampledTrace {
					t.Errorf("span %q of trace %s exported; only the sampled trace should be", sp.GetName(), trace)
					continue
				}
				byName[sp.GetName()] = sp
				for k, want := range map[string]string{"service.name": "ratelimit", "service.namespace": "envoy-gateway-system", "service.instance.id": "pod-1"} {
					if got := recv.res[i][k]; got != want {
						t.Errorf("resource %s = %q, want %q", k, got, want)
					}
				}
			}
			server := byName["envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"]
			if server == nil {
				t.Fatalf("no ShouldRateLimit span among %d spans", len(recv.spans))
			}
			if got := hex.EncodeToString(server.GetParentSpanId()); got != envoySpan {
				t.Errorf("server span parent %s, want Envoy's %s", got, envoySpan)
			}
			if server.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("server span kind %v", server.GetKind())
			}
			st := byName["ratelimitd.store.Take"]
			if st == nil {
				t.Fatal("no store span")
			}
			if !bytes.Equal(st.GetParentSpanId(), server.GetSpanId()) {
				t.Errorf("store span's parent is not the server span")
			}
			if len(byName) != 2 {
				t.Errorf("spans %v, want the server and store spans only (no health check spans)", keys(byName))
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestTracingSettings(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    tracingSettings
		wantErr string
	}{
		{name: "off", env: map[string]string{"TRACING_SERVICE_NAME": "x"}},
		{name: "envoyproxy defaults", env: map[string]string{"TRACING_ENABLED": "true"},
			want: tracingSettings{Enabled: true, Service: "RateLimit", Protocol: tracing.HTTP, SamplingRate: 1}},
		{name: "grpc, half sampled", env: map[string]string{"TRACING_ENABLED": "true", "TRACING_EXPORTER_PROTOCOL": "gRPC", "TRACING_SAMPLING_RATE": "0.5", "TRACING_SERVICE_INSTANCE_ID": "i"},
			want: tracingSettings{Enabled: true, Service: "RateLimit", InstanceID: "i", Protocol: tracing.GRPC, SamplingRate: 0.5}},
		{name: "bad protocol", env: map[string]string{"TRACING_ENABLED": "true", "TRACING_EXPORTER_PROTOCOL": "zipkin"}, wantErr: "TRACING_EXPORTER_PROTOCOL"},
		{name: "bad rate", env: map[string]string{"TRACING_ENABLED": "true", "TRACING_SAMPLING_RATE": "1.5"}, wantErr: "TRACING_SAMPLING_RATE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := parseOrReject(t, tc.env, tc.wantErr)
			if !ok {
				return
			}
			if s.Tracing != tc.want {
				t.Fatalf("got %+v, want %+v", s.Tracing, tc.want)
			}
			for _, w := range s.Warnings {
				if strings.Contains(w, "TRACING") {
					t.Errorf("warning %q for a setting that is honoured", w)
				}
			}
		})
	}
}

// Package tracing exports OpenTelemetry spans over OTLP the way
// envoyproxy/ratelimit does (TRACING_* settings, W3C trace context from
// Envoy): a server span per ShouldRateLimit from otelgrpc's stats handler
// and a child span per store round trip.
package tracing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"
)

// Protocol is TRACING_EXPORTER_PROTOCOL.
type Protocol uint8

const (
	HTTP Protocol = iota + 1 // OTLP/HTTP protobuf, envoyproxy's default
	GRPC
)

// ParseProtocol reads envoyproxy's spelling: "http" or "grpc".
func ParseProtocol(s string) (Protocol, error) {
	switch strings.ToLower(s) {
	case "http", "":
		return HTTP, nil
	case "grpc":
		return GRPC, nil
	}
	return 0, fmt.Errorf("tracing: protocol %q: want http or grpc", s)
}

// Config is what the TRACING_* and OTEL_* settings say.
type Config struct {
	ServiceName       string
	ServiceNamespace  string
	ServiceInstanceID string // empty: a random one per process, as envoyproxy does
	Protocol          Protocol
	// EndpointURL overrides where spans go (a full URL, used as is).
	// Empty, as ratelimitd runs it, leaves the exporter to read
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT and
	// the other OTEL_EXPORTER_OTLP_* variables itself, exactly as in
	// envoyproxy/ratelimit, which uses the same exporters.
	EndpointURL string
	// SamplingRate is TRACING_SAMPLING_RATE (0..1) for traces Envoy did
	// not decide; a sampled or unsampled parent is followed.
	SamplingRate float64
}

// Provider owns the exporter: Shutdown flushes what is buffered.
type Provider struct {
	tp   *sdktrace.TracerProvider
	prop propagation.TextMapPropagator
}

// New builds the exporter and tracer provider. Nothing is dialled until
// the first batch is exported.
func New(ctx context.Context, c Config) (*Provider, error) {
	var client otlptrace.Client
	switch c.Protocol {
	case HTTP:
		var opts []otlptracehttp.Option
		if c.EndpointURL != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(c.EndpointURL))
		}
		client = otlptracehttp.NewClient(opts...)
	case GRPC:
		var opts []otlptracegrpc.Option
		if c.EndpointURL != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(c.EndpointURL))
		}
		client = otlptracegrpc.NewClient(opts...)
	default:
		return nil, fmt.Errorf("tracing: protocol %d: want HTTP or GRPC", c.Protocol)
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	instance := c.ServiceInstanceID
	if instance == "" {
		instance = randomID()
	}
	attrs := []resource.Option{resource.WithAttributes(
		semconv.ServiceName(c.ServiceName),
		semconv.ServiceInstanceID(instance),
	)}
	if c.ServiceNamespace != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceNamespace(c.ServiceNamespace)))
	}
	res, err := resource.New(ctx, append(attrs, resource.WithSchemaURL(semconv.SchemaURL))...)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SamplingRate))),
	)
	// envoyproxy extracts W3C trace context and baggage; Envoy's
	// OpenTelemetry tracer (Envoy Gateway's, Istio's) sends traceparent.
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	return &Provider{tp: tp, prop: prop}, nil
}

// ServerHandler is the gRPC stats handler making the server spans, with
// the parent taken from the request's metadata. Health checks make none:
// a probe every few seconds would drown the traces worth reading.
func (p *Provider) ServerHandler() stats.Handler {
	return otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(p.tp),
		otelgrpc.WithPropagators(p.prop),
		otelgrpc.WithFilter(filters.Not(filters.ServiceName("grpc.health.v1.Health"))),
	)
}

// TracerProvider is for spans of our own (the store's: stack.WithTracing).
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// Shutdown exports what is buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	return p.tp.Shutdown(ctx)
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

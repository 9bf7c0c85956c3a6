package daemon

import "github.com/ratelimitd/ratelimitd/internal/tracing"

// tracingSettings are envoyproxy's TRACING_* settings. The exporter reads
// the OTEL_EXPORTER_OTLP_* variables (endpoint, headers, certificate,
// timeout) from the environment itself.
type tracingSettings struct {
	Enabled      bool
	Service      string
	Namespace    string
	InstanceID   string
	Protocol     tracing.Protocol
	SamplingRate float64
}

// readTracing reads TRACING_ENABLED and, when it is on, the rest with
// envoyproxy's defaults.
func (s *settings) readTracing(env *envReader) {
	if !env.boolean("TRACING_ENABLED", false) {
		return
	}
	t := &s.Tracing
	t.Enabled = true
	t.Service = env.str("TRACING_SERVICE_NAME", "RateLimit")
	t.Namespace = env.str("TRACING_SERVICE_NAMESPACE", "")
	t.InstanceID = env.str("TRACING_SERVICE_INSTANCE_ID", "")
	proto := env.oneOf("TRACING_EXPORTER_PROTOCOL", "http", "http", "grpc")
	t.Protocol, _ = tracing.ParseProtocol(proto) // oneOf checked the spelling
	t.SamplingRate = env.fraction("TRACING_SAMPLING_RATE", 1)
}

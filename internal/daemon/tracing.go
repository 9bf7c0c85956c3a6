package daemon

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/ratelimitd/ratelimitd/internal/tracing"
)

// startTracing, with TRACING_ENABLED, starts the exporter and returns the
// gRPC option making a server span per call; the store's spans come from
// tracerProvider.
func (a *app) startTracing() ([]grpc.ServerOption, error) {
	t := a.set.Tracing
	if !t.Enabled {
		return nil, nil
	}
	p, err := tracing.New(context.Background(), tracing.Config{
		ServiceName:       t.Service,
		ServiceNamespace:  t.Namespace,
		ServiceInstanceID: t.InstanceID,
		Protocol:          t.Protocol,
		SamplingRate:      t.SamplingRate,
	})
	if err != nil {
		return nil, fmt.Errorf("TRACING_ENABLED: %w", err)
	}
	a.tracing = p
	return []grpc.ServerOption{grpc.StatsHandler(p.ServerHandler())}, nil
}

// tracerProvider is the store's spans' provider: nil without tracing.
func (a *app) tracerProvider() trace.TracerProvider {
	if a.tracing == nil {
		return nil
	}
	return a.tracing.TracerProvider()
}

// announceTracing logs that spans are exported, once the store is built.
func (a *app) announceTracing() {
	if t := a.set.Tracing; t.Enabled {
		a.log.Info("tracing enabled", zap.String("service", t.Service), zap.Float64("sampling_rate", t.SamplingRate))
	}
}

// stopTracing flushes buffered spans within the shutdown timeout.
func (a *app) stopTracing() error {
	if a.tracing == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.set.ShutdownTimeout)
	defer cancel()
	if err := a.tracing.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("flushing traces: %w", err)
	}
	return nil
}

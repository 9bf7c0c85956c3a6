package daemon

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/ratelimitd/ratelimitd/internal/tracing"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// startTracing, with TRACING_ENABLED, wraps the store in a span per round
// trip and returns the gRPC option making a server span per call.
func (a *app) startTracing(st store.Store) (store.Store, []grpc.ServerOption, error) {
	t := a.set.Tracing
	if !t.Enabled {
		return st, nil, nil
	}
	p, err := tracing.New(context.Background(), tracing.Config{
		ServiceName:       t.Service,
		ServiceNamespace:  t.Namespace,
		ServiceInstanceID: t.InstanceID,
		Protocol:          t.Protocol,
		SamplingRate:      t.SamplingRate,
	})
	if err != nil {
		return st, nil, fmt.Errorf("TRACING_ENABLED: %w", err)
	}
	a.tracing = p
	a.log.Info("tracing enabled", zap.String("service", t.Service), zap.Float64("sampling_rate", t.SamplingRate))
	return tracing.WrapStore(st, p.Tracer(), a.set.Backend.String()), []grpc.ServerOption{grpc.StatsHandler(p.ServerHandler())}, nil
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

package stack

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// traced adds a span around each Take: the one backend round trip of a
// request, so its share of ShouldRateLimit's latency is visible.
type traced struct {
	store.Decorator
	next    store.Store
	tracer  trace.Tracer
	backend string
}

var (
	_ store.Lender    = (*traced)(nil)
	_ store.Admin     = (*traced)(nil)
	_ store.Forgetter = (*traced)(nil)
)

// newTraced traces next's round trips; backend names it in the span
// ("redis", "memory").
func newTraced(next store.Store, tracer trace.Tracer, backend string) *traced {
	return &traced{Decorator: store.Decorate(next), next: next, tracer: tracer, backend: backend}
}

// Take runs next.Take inside a client span (for the embedded store, an
// internal one) recording the batch size and any backend error.
func (s *traced) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	kind := trace.SpanKindClient
	if s.backend == "memory" {
		kind = trace.SpanKindInternal
	}
	ctx, span := s.tracer.Start(ctx, "ratelimitd.store.Take", trace.WithSpanKind(kind),
		trace.WithAttributes(attribute.String("ratelimitd.backend", s.backend), attribute.Int("ratelimitd.requests", len(reqs))))
	defer span.End()
	res, err := s.next.Take(ctx, reqs)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "backend failure")
	}
	return res, err
}

// Close closes next.
func (s *traced) Close() error { return s.next.Close() }

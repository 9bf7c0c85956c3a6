package stack_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/stack"
)

// TestStoreSpan: with WithTracing each Take is one span under the caller's,
// with the batch size, and a backend failure marks it as an error.
func TestStoreSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	stk, err := stack.New(stack.WithTracing(tp))
	if err != nil {
		t.Fatal(err)
	}
	st := stk.Store

	ctx, parent := tp.Tracer("test").Start(context.Background(), "ShouldRateLimit")
	reqs := []store.Request{
		{Key: "a", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Minute}, Hits: 1},
		{Key: "b", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Minute}, Hits: 1},
	}
	if _, err := st.Take(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Take(ctx, reqs); !errors.Is(err, memstore.ErrClosed) {
		t.Fatalf("Take after Close: %v, want the store's error passed through", err)
	}
	parent.End()

	var takes []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "ratelimitd.store.Take" {
			takes = append(takes, s)
		}
	}
	if len(takes) != 2 {
		t.Fatalf("%d store spans, want 2", len(takes))
	}
	for i, s := range takes {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %d: parent %v, want the caller's span", i, s.Parent().SpanID())
		}
		if s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("span %d: kind %v, want internal for the embedded store", i, s.SpanKind())
		}
		attrs := attribute.NewSet(s.Attributes()...)
		if v, _ := attrs.Value("ratelimitd.requests"); v.AsInt64() != 2 {
			t.Errorf("span %d: requests %v", i, v)
		}
		if v, _ := attrs.Value("ratelimitd.backend"); v.AsString() != "memory" {
			t.Errorf("span %d: backend %v", i, v)
		}
	}
	if takes[0].Status().Code == codes.Error || takes[1].Status().Code != codes.Error {
		t.Errorf("statuses %v, %v; want ok then error", takes[0].Status(), takes[1].Status())
	}
}

package tracing_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/tracing"
)

func TestParseProtocol(t *testing.T) {
	for in, want := range map[string]tracing.Protocol{"http": tracing.HTTP, "": tracing.HTTP, "GRPC": tracing.GRPC, "grpc": tracing.GRPC} {
		if got, err := tracing.ParseProtocol(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := tracing.ParseProtocol("zipkin"); err == nil {
		t.Error("zipkin accepted")
	}
}

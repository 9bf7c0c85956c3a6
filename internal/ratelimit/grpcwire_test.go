package ratelimit_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/internal/testkit/rawgrpc"
)

// serveGuarded runs svc the way internal/daemon does, with health and
// reflection beside it, on a loopback port.
func serveGuarded(t *testing.T, svc *ratelimit.Service) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(svc.GRPCServerOptions()...)
	svc.RegisterGRPC(srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestGRPCDecodeGuard(t *testing.T) {
	svc := newFixture(t, testConfig).svc
	conn := serveGuarded(t, svc)
	valid, err := proto.Marshal(request("test", desc("one", "")))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		body     []byte
		wantCode codes.Code
		wantText string
	}{
		{"valid", valid, codes.OK, ""},
		{"not protobuf", []byte{0xff, 0xff, 0xff}, codes.InvalidArgument, "not a valid RateLimitRequest protobuf"},
		{"4 MiB of empty descriptors", bytes.Repeat([]byte{0x12, 0x00}, 2<<20), codes.InvalidArgument, "more than the maximum of 64 descriptors"},
		{"over the receive limit", append(valid, bytes.Repeat([]byte{0xfa, 0x01, 0x00}, 2<<20)...), codes.ResourceExhausted, "larger than max"},
		{"empty", nil, codes.InvalidArgument, "domain must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var resp rlsv3.RateLimitResponse
			err := conn.Invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, tt.body, &resp, grpc.ForceCodecV2(rawgrpc.Codec{}))
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code %v (%v), want %v", got, err, tt.wantCode)
			}
			if tt.wantCode == codes.OK && resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				t.Errorf("response %v, want OK", &resp)
			}
			if tt.wantText != "" && !strings.Contains(status.Convert(err).Message(), tt.wantText) {
				t.Errorf("message %q does not mention %q", status.Convert(err).Message(), tt.wantText)
			}
		})
	}

	// The codec leaves every other service alone.
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health check through the guard codec: %v", err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	got, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection through the guard codec: %v", err)
	}
	if !strings.Contains(got.String(), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Errorf("reflection lists %v, want the RateLimitService", got)
	}
	// A typed client works unchanged.
	if _, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(t.Context(), request("test", desc("two", ""))); err != nil {
		t.Errorf("typed client: %v", err)
	}
}

package ratelimit_test

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

func TestRecoverUnary(t *testing.T) {
	info := &grpc.UnaryServerInfo{FullMethod: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}
	tests := []struct {
		name     string
		handler  grpc.UnaryHandler
		wantResp any
		wantCode codes.Code
		wantLogs int
	}{
		{"panic becomes Internal", func(context.Context, any) (any, error) { panic("boom") }, nil, codes.Internal, 1},
		{"nil map panic becomes Internal", func(context.Context, any) (any, error) {
			var m map[string]int
			m["x"] = 1
			return nil, nil
		}, nil, codes.Internal, 1},
		{"normal calls pass through", func(context.Context, any) (any, error) { return "resp", nil }, "resp", codes.OK, 0},
		{"errors pass through", func(context.Context, any) (any, error) {
			return nil, status.Error(codes.Unavailable, "down")
		}, nil, codes.Unavailable, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.ErrorLevel)
			resp, err := ratelimit.RecoverUnary(zap.New(core))(context.Background(), "req", info, tt.handler)
			if resp != tt.wantResp {
				t.Errorf("resp = %v, want %v", resp, tt.wantResp)
			}
			if status.Code(err) != tt.wantCode {
				t.Errorf("code = %v, want %v", status.Code(err), tt.wantCode)
			}
			if logs.Len() != tt.wantLogs {
				t.Errorf("%d error logs, want %d", logs.Len(), tt.wantLogs)
			}
		})
	}
}

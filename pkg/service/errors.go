package service

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// backendError turns a store failure into the gRPC status Envoy acts on
// (its failure_mode_deny decides): never an OK, never UNKNOWN. When the
// caller's own deadline or cancellation caused it, say so instead of blaming
// the backend.
func (s *Service) backendError(ctx context.Context, err error) error {
	kind := "unavailable"
	defer func() {
		if s.obs != nil {
			s.obs.BackendError(kind)
		}
	}()
	switch ctxErr := ctx.Err(); {
	case errors.Is(ctxErr, context.DeadlineExceeded):
		kind = "deadline"
		s.errLog.Warn("deadline exceeded waiting for the backend", zap.Error(err))
		return status.Errorf(codes.DeadlineExceeded, "deadline exceeded waiting for the backend: %v", err)
	case errors.Is(ctxErr, context.Canceled):
		kind = "canceled"
		return status.Errorf(codes.Canceled, "request canceled while waiting for the backend: %v", err)
	}
	s.errLog.Error("backend unavailable", zap.Error(err))
	return status.Errorf(codes.Unavailable, "backend unavailable: %v", err)
}

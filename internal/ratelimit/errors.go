package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// BackendStatus turns a store failure into the gRPC status Envoy acts on
// (its failure_mode_deny decides): never an OK, never UNKNOWN. When the
// caller's own deadline or cancellation caused it, it says so instead of
// blaming the backend. The counters API answers its store failures with it
// too.
func BackendStatus(ctx context.Context, err error) error {
	return backendStatus(backendErrorKind(ctx), err)
}

func backendStatus(kind string, err error) error {
	switch kind {
	case "deadline":
		return status.Errorf(codes.DeadlineExceeded, "deadline exceeded waiting for the backend: %v", err)
	case "canceled":
		return status.Errorf(codes.Canceled, "request canceled while waiting for the backend: %v", err)
	}
	return status.Errorf(codes.Unavailable, "backend unavailable: %v", err)
}

// backendErrorKind is the metric label of a store failure seen under ctx.
func backendErrorKind(ctx context.Context) string {
	switch ctxErr := ctx.Err(); {
	case errors.Is(ctxErr, context.DeadlineExceeded) || deadlinePassed(ctx):
		return "deadline"
	case errors.Is(ctxErr, context.Canceled):
		return "canceled"
	}
	return "unavailable"
}

// deadlinePassed reports whether ctx's deadline is behind us: a read that
// timed out at the deadline may return before the context's timer fires,
// and must still be the caller's deadline, not the backend's failure.
func deadlinePassed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// backendError is BackendStatus, counted and logged. A deadline that
// REQUEST_TIMEOUT set is the service's, not the caller's: UNAVAILABLE.
func (s *Service) backendError(ctx context.Context, err error) error {
	kind := backendErrorKind(ctx)
	if kind == "deadline" && s.admission.expired(ctx) {
		kind, err = "unavailable", fmt.Errorf("REQUEST_TIMEOUT (%s) passed: %w", s.admission.timeout, err)
	}
	if s.obs != nil {
		s.obs.BackendError(kind)
	}
	switch kind {
	case "deadline":
		s.errLog.Warn("deadline exceeded waiting for the backend", zap.Error(err))
	case "unavailable":
		s.errLog.Error("backend unavailable", zap.Error(err))
	}
	return backendStatus(kind, err)
}

package middleware

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimitd/ratelimitd/pkg/client"
)

// UnaryServerInterceptor limits unary calls. Install it after the
// interceptor that authenticates (and calls client.WithUser), so that the
// User action sees the user.
func (m *Middleware) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		setHeader := func(md metadata.MD) error { return grpc.SetHeader(ctx, md) }
		if err := m.checkGRPC(ctx, info.FullMethod, setHeader); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor limits streams: one decision when a stream
// starts, not one per message.
func (m *Middleware) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := m.checkGRPC(ss.Context(), info.FullMethod, ss.SetHeader); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// checkGRPC decides a call: nil lets it through with the service's headers
// set as response metadata; a denial is RESOURCE_EXHAUSTED with the same
// headers and, when the service sent Retry-After, a RetryInfo detail; a call
// the backend could not decide fails UNAVAILABLE (INVALID_ARGUMENT when the
// service found the request malformed; the context's code when the caller
// gave up), with a message that says no more (the error goes to
// WithErrorHandler and WithLogger).
func (m *Middleware) checkGRPC(ctx context.Context, fullMethod string, setHeader func(metadata.MD) error) error {
	route := m.routes.grpcRoute(fullMethod)
	if route == nil {
		return nil
	}
	descs := m.builder.GRPC(ctx, fullMethod, route.RateLimits)
	if len(descs) == 0 {
		return nil
	}
	d := m.decide(ctx, &rlsv3.RateLimitRequest{Domain: m.routes.domain, Descriptors: descs})
	if md := d.Metadata(); md != nil {
		// Fails only once headers were sent, which no handler has done yet.
		_ = setHeader(md)
	}
	switch d.Verdict {
	case client.Admitted:
		return nil
	case client.Denied:
		return denied(d)
	}
	return failed(ctx, d.Err)
}

func failed(ctx context.Context, err error) error {
	switch {
	case status.Code(err) == codes.InvalidArgument:
		return status.Error(codes.InvalidArgument, msgInvalid)
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	default:
		return status.Error(codes.Unavailable, msgUnavailable)
	}
}

func denied(d client.Decision) error {
	st := status.New(codes.ResourceExhausted, "rate limit exceeded")
	if after, ok := d.RetryAfter(); ok {
		if with, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)}); err == nil {
			st = with
		}
	}
	return st.Err()
}

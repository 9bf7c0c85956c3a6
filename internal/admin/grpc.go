package admin

import (
	"context"
	"slices"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
)

type callerKey struct{}

// caller is who the authentication admitted ("token", "san:<name>").
func caller(ctx context.Context) string {
	who, _ := ctx.Value(callerKey{}).(string)
	return who
}

// RegisterGRPC serves s on srv, each method behind the credential: the
// check runs before the request is even decoded, and guards this service
// only, so ShouldRateLimit pays nothing for it. Reflection lists the
// service like any other.
func (s *Server) RegisterGRPC(srv grpc.ServiceRegistrar) {
	desc := adminv1.Counters_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i := range desc.Methods {
		next := desc.Methods[i].Handler
		desc.Methods[i].Handler = func(impl any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			who, err := s.auth.grpc(ctx)
			if err != nil {
				s.refused(ctx, "grpc", desc.Methods[i].MethodName)
				return nil, status.Error(codes.Unauthenticated, err.Error())
			}
			if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
				who += "@" + p.Addr.String()
			}
			return next(impl, context.WithValue(ctx, callerKey{}, who), dec, ic)
		}
	}
	srv.RegisterService(&desc, s)
}

func (s *Server) refused(ctx context.Context, transport, method string) {
	s.metrics.denied.WithLabelValues(transport).Inc()
	from := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		from = p.Addr.String()
	}
	s.denyLog.Warn("counters API call refused: missing or wrong admin credential",
		zap.String("transport", transport), zap.String("method", method), zap.String("from", from))
}

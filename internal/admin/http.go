package admin

import (
	"context"
	"errors"
	"io"
	"net/http"

	"go.uber.org/zap"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

// maxBody bounds an HTTP request body: MAX_DESCRIPTORS x MAX_DESCRIPTOR_ENTRIES
// x MAX_VALUE_LENGTH at their defaults is 2 MiB of values; the service's
// caps then apply as over gRPC.
const maxBody = 4 << 20

// RegisterHTTP serves the same calls as JSON (protojson, the field names
// grpcurl shows) on mux: POST /admin/counters/get, /reset and /list, with
// "Authorization: Bearer <token>". The debug port is plain HTTP, so only
// the token is checked there; without one configured nothing is
// registered and the paths answer 404.
func (s *Server) RegisterHTTP(mux *http.ServeMux) {
	if !s.auth.HasToken() {
		return
	}
	mux.Handle("POST /admin/counters/get", s.handle("Get", func() proto.Message { return &adminv1.GetRequest{} },
		func(ctx context.Context, m proto.Message) (proto.Message, error) {
			return s.Get(ctx, m.(*adminv1.GetRequest))
		}))
	mux.Handle("POST /admin/counters/reset", s.handle("Reset", func() proto.Message { return &adminv1.ResetRequest{} },
		func(ctx context.Context, m proto.Message) (proto.Message, error) {
			return s.Reset(ctx, m.(*adminv1.ResetRequest))
		}))
	mux.Handle("POST /admin/counters/list", s.handle("List", func() proto.Message { return &adminv1.ListRequest{} },
		func(ctx context.Context, m proto.Message) (proto.Message, error) {
			return s.List(ctx, m.(*adminv1.ListRequest))
		}))
}

func (s *Server) handle(method string, newReq func() proto.Message, call func(context.Context, proto.Message) (proto.Message, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := s.auth.http(r)
		if err != nil {
			s.metrics.denied.WithLabelValues("http").Inc()
			s.denyLog.Warn("counters API call refused: missing or wrong admin credential",
				zap.String("transport", "http"), zap.String("method", method), zap.String("from", r.RemoteAddr))
			w.Header().Set("WWW-Authenticate", `Bearer realm="ratelimitd-admin"`)
			writeError(w, status.Error(codes.Unauthenticated, err.Error()))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err != nil {
			writeError(w, status.Errorf(codes.InvalidArgument, "request body: %v", err))
			return
		}
		req := newReq()
		if err := (protojson.UnmarshalOptions{}).Unmarshal(body, req); err != nil {
			writeError(w, status.Errorf(codes.InvalidArgument, "request body: %v", err))
			return
		}
		ctx := context.WithValue(r.Context(), callerKey{}, who+"@"+r.RemoteAddr)
		resp, err := call(ctx, req)
		if err != nil {
			writeError(w, err)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			writeError(w, status.Errorf(codes.Internal, "encoding the answer: %v", err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// writeError answers {"code": "UNAUTHENTICATED", "message": ...} with the
// HTTP status closest to the gRPC code.
func writeError(w http.ResponseWriter, err error) {
	st, _ := status.FromError(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ratelimit.HTTPStatus(st.Code()))
	out, _ := protojson.Marshal(st.Proto())
	_, _ = w.Write(out)
}

package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxJSONBody bounds a /json request; a RateLimitRequest within the default
// caps is a few hundred KiB at most.
const maxJSONBody = 1 << 20

// SetServing flips what /healthcheck reports; run() clears it on SIGTERM so
// load balancers stop sending traffic before the listeners close.
func (s *Service) SetServing(serving bool) {
	s.draining.Store(!serving)
}

// Healthy reports whether the service is serving with a config loaded.
func (s *Service) Healthy() bool {
	cfg := s.cfg.Current()
	return !s.draining.Load() && cfg != nil && (!s.healthyNeedsDomain || len(cfg.Domains()) > 0)
}

// RegisterHTTP adds /healthcheck and /json to mux, as envoyproxy serves them.
func (s *Service) RegisterHTTP(mux *http.ServeMux) {
	mux.Handle("/healthcheck", s.HealthHandler())
	mux.Handle("/json", s.JSONHandler())
}

// HealthHandler answers 200 "OK" while Healthy, 500 otherwise.
func (s *Service) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !s.Healthy() {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "NOT OK")
			return
		}
		_, _ = io.WriteString(w, "OK")
	})
}

// JSONHandler serves POST /json: a protojson RateLimitRequest in, a protojson
// RateLimitResponse out, with 200 for OK and 429 for OVER_LIMIT. Errors map
// to 400 (bad JSON or request), 503 (no config, backend down), 504 (deadline).
func (s *Service) JSONHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST with a JSON RateLimitRequest", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, fmt.Sprintf("request body is over %d bytes", maxJSONBody), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		var req rlsv3.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			http.Error(w, "invalid RateLimitRequest JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := s.safeShouldRateLimit(r.Context(), &req)
		if err != nil {
			st := status.Convert(err)
			http.Error(w, st.Message(), httpStatus(st.Code()))
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(out)
	})
}

// safeShouldRateLimit gives /json the same panic guard RecoverUnary gives
// gRPC.
func (s *Service) safeShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (resp *rlsv3.RateLimitResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in /json handler", zap.String("panic", fmt.Sprint(r)), zap.Stack("stack"))
			resp, err = nil, status.Error(codes.Internal, "internal error")
		}
	}()
	return s.ShouldRateLimit(ctx, req)
}

func httpStatus(c codes.Code) int {
	switch c {
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.Canceled:
		// The client is gone; the status is for logs only.
		return 499
	default:
		return http.StatusInternalServerError
	}
}

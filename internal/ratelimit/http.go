package ratelimit

import (
	"bytes"
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

// SetServing flips what /healthcheck reports. ratelimitd clears it when it
// starts shutting down (SIGINT, SIGTERM, or a server or the config watcher
// failing), right before the graceful stop of its listeners: health checks
// still in flight on open connections then answer 500. There is no drain
// delay between the two, so a load balancer also learns of the shutdown
// from the closed listeners.
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
		req, code, err := s.readJSONRequest(w, r)
		if err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		resp, err := s.safeShouldRateLimit(r.Context(), req)
		if err != nil {
			st := status.Convert(err)
			http.Error(w, st.Message(), HTTPStatus(st.Code()))
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

// HTTPStatus is the HTTP status closest to a gRPC code, for the JSON
// endpoints that answer what the gRPC ones would (/json, the counters API).
func HTTPStatus(c codes.Code) int {
	switch c {
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.Unavailable, codes.ResourceExhausted:
		// ResourceExhausted: MAX_CONCURRENT_REQUESTS; 429 would read as
		// OVER_LIMIT.
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

// readJSONRequest reads and decodes a /json body within the body cap the
// caps imply, counting descriptors and entries as the bytes stream in so an
// oversized shape is refused before it is buffered or decoded, and decodes
// within the decode budget. On error it returns the HTTP status to answer.
func (s *Service) readJSONRequest(w http.ResponseWriter, r *http.Request) (*rlsv3.RateLimitRequest, int, error) {
	limit := s.caps.maxJSONBytes()
	if r.ContentLength > int64(limit) {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body is over %d bytes", limit)
	}
	var body bytes.Buffer
	src := io.TeeReader(http.MaxBytesReader(w, r.Body, int64(limit)), &body)
	if err := s.caps.prescanJSON(src); err != nil {
		return nil, jsonReadStatus(err), err
	}
	// What follows the request (whitespace, or garbage protojson rejects).
	if _, err := io.Copy(io.Discard, src); err != nil {
		return nil, jsonReadStatus(err), err
	}
	// Only decoding shares the budget: a slow sender must not hold it
	// while its body trickles in.
	n, err := s.decode.acquire(r.Context(), int64(body.Len()))
	if err != nil {
		return nil, http.StatusServiceUnavailable, fmt.Errorf("waiting to decode: %w", err)
	}
	defer s.decode.release(n)
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body.Bytes(), &req); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("invalid RateLimitRequest JSON: %w", err)
	}
	return &req, 0, nil
}

func jsonReadStatus(err error) int {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

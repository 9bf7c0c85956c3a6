package ratelimit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

func serveHTTP(svc *ratelimit.Service, method, path, body string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	svc.RegisterHTTP(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}

func TestHealthcheck(t *testing.T) {
	cfg := parse(t, testConfig)
	tests := []struct {
		name     string
		src      ratelimit.ConfigSource
		draining bool
		want     int
		wantBody string
	}{
		{"serving", staticConfig{cfg}, false, http.StatusOK, "OK"},
		{"shutting down", staticConfig{cfg}, true, http.StatusInternalServerError, "NOT OK"},
		{"no config loaded", staticConfig{nil}, false, http.StatusInternalServerError, "NOT OK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := ratelimit.New(tt.src, &fakeStore{})
			svc.SetServing(!tt.draining)
			rec := serveHTTP(svc, http.MethodGet, "/healthcheck", "")
			if rec.Code != tt.want || rec.Body.String() != tt.wantBody {
				t.Errorf("GET /healthcheck = %d %q, want %d %q", rec.Code, rec.Body.String(), tt.want, tt.wantBody)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	failing := &fakeStore{fn: func(context.Context, []store.Request) ([]store.Result, error) {
		return nil, errors.New("redis down")
	}}
	const oneReq = `{"domain":"test","descriptors":[{"entries":[{"key":"one"}]}]}`
	tests := []struct {
		name     string
		store    store.Store
		method   string
		bodies   []string // sent in order; the last response is checked
		want     int
		wantCode rlsv3.RateLimitResponse_Code
		wantText string
	}{
		{name: "under the limit", method: http.MethodPost, bodies: []string{oneReq}, want: http.StatusOK, wantCode: OK},
		{name: "over the limit", method: http.MethodPost, bodies: []string{oneReq, oneReq}, want: http.StatusTooManyRequests, wantCode: OVER},
		{name: "bad JSON", method: http.MethodPost, bodies: []string{`{"domain":`}, want: http.StatusBadRequest, wantText: "invalid RateLimitRequest JSON"},
		{name: "unknown field", method: http.MethodPost, bodies: []string{`{"domian":"x"}`}, want: http.StatusBadRequest, wantText: "invalid RateLimitRequest JSON"},
		{name: "invalid request", method: http.MethodPost, bodies: []string{`{"domain":"test"}`}, want: http.StatusBadRequest, wantText: "descriptor list must not be empty"},
		{name: "backend down", store: failing, method: http.MethodPost, bodies: []string{oneReq}, want: http.StatusServiceUnavailable, wantText: "backend unavailable"},
		{name: "GET", method: http.MethodGet, bodies: []string{""}, want: http.StatusMethodNotAllowed, wantText: "use POST"},
		{name: "huge body", method: http.MethodPost, bodies: []string{strings.Repeat(" ", 8<<20)}, want: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var svc *ratelimit.Service
			if tt.store != nil {
				svc = ratelimit.New(staticConfig{parse(t, testConfig)}, tt.store)
			} else {
				svc = newFixture(t, testConfig).svc
			}
			var rec *httptest.ResponseRecorder
			for _, body := range tt.bodies {
				rec = serveHTTP(svc, tt.method, "/json", body)
			}
			if rec.Code != tt.want {
				t.Fatalf("status = %d, want %d (body %q)", rec.Code, tt.want, rec.Body.String())
			}
			body, _ := io.ReadAll(rec.Body)
			if tt.wantText != "" && !strings.Contains(string(body), tt.wantText) {
				t.Errorf("body %q does not contain %q", body, tt.wantText)
			}
			if rec.Code != http.StatusOK && rec.Code != http.StatusTooManyRequests {
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var resp rlsv3.RateLimitResponse
			if err := protojson.Unmarshal(body, &resp); err != nil {
				t.Fatalf("response is not a RateLimitResponse: %v (%s)", err, body)
			}
			if resp.GetOverallCode() != tt.wantCode || len(resp.GetStatuses()) != 1 {
				t.Errorf("response = %v, want overall %v with one status", &resp, tt.wantCode)
			}
		})
	}
}

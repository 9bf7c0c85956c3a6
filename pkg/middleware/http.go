package middleware

import (
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/pkg/client"
)

// Handler limits next's requests. A request no HTTP route matches, or from
// which no RateLimit makes a descriptor, passes without a decision. An
// admitted one reaches next with the service's headers already on its
// response; a denied one gets 429 Too Many Requests with them; one the
// backend could not decide under OnErrorUnavailable gets 503 Service
// Unavailable (400 Bad Request for a request the service finds malformed,
// such as a header value over its length cap), with a body that says no
// more (the error goes to WithErrorHandler and WithLogger).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := m.routes.httpRoute(r)
		if route == nil {
			next.ServeHTTP(w, r)
			return
		}
		descs := m.builder.HTTP(r, route.RateLimits)
		if len(descs) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		d := m.decide(r.Context(), &rlsv3.RateLimitRequest{Domain: m.routes.domain, Descriptors: descs})
		switch d.Verdict {
		case client.Admitted:
			d.SetHeaders(w.Header())
			next.ServeHTTP(w, r)
		case client.Denied:
			d.SetHeaders(w.Header())
			http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		default:
			code, msg := http.StatusServiceUnavailable, msgUnavailable
			if status.Code(d.Err) == codes.InvalidArgument {
				code, msg = http.StatusBadRequest, msgInvalid
			}
			http.Error(w, msg, code)
		}
	})
}

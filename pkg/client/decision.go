package client

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"
)

// Decision is a Limiter's answer to one request.
type Decision struct {
	Verdict Verdict
	// Response is the service's answer; nil when it gave none.
	Response *rlsv3.RateLimitResponse
	// Err is why the backend gave no answer: set with Failed, and with
	// Admitted or Denied when OnError decided.
	Err error
}

// Allowed reports whether the request may proceed.
func (d Decision) Allowed() bool { return d.Verdict == Admitted }

// SetHeaders adds the response headers the service computed
// (RateLimit-Limit/Remaining/Reset, RateLimit-Policy and RateLimit,
// Retry-After: whichever its settings enable) to h, as Envoy adds them to
// the response. There are none when OnError decided.
func (d Decision) SetHeaders(h http.Header) {
	hs := d.Response.GetResponseHeadersToAdd()
	// One backing array for every value: a header the response does not
	// have yet (the usual case) costs no allocation of its own.
	values := make([]string, len(hs))
	for i, hv := range hs {
		k := canonicalKey(hv.GetKey())
		values[i] = hv.GetValue()
		if old, ok := h[k]; ok {
			h[k] = append(old, values[i])
			continue
		}
		h[k] = values[i : i+1 : i+1]
	}
}

// canonicalKey is http.CanonicalHeaderKey without its allocation for the
// names the service sends by default.
func canonicalKey(k string) string {
	switch k {
	case "RateLimit-Limit":
		return "Ratelimit-Limit"
	case "RateLimit-Remaining":
		return "Ratelimit-Remaining"
	case "RateLimit-Reset":
		return "Ratelimit-Reset"
	case "RateLimit-Policy":
		return "Ratelimit-Policy"
	case "RateLimit":
		return "Ratelimit"
	case "Retry-After":
		return "Retry-After"
	}
	return http.CanonicalHeaderKey(k)
}

// Metadata is the same headers as gRPC metadata (lower-case keys).
func (d Decision) Metadata() metadata.MD {
	hs := d.Response.GetResponseHeadersToAdd()
	if len(hs) == 0 {
		return nil
	}
	md := make(metadata.MD, len(hs))
	for _, hv := range hs {
		k := strings.ToLower(hv.GetKey())
		md[k] = append(md[k], hv.GetValue())
	}
	return md
}

// RetryAfter is the service's Retry-After header, when it sent one
// (RetryAfter in the service's headers, and a denial).
func (d Decision) RetryAfter() (time.Duration, bool) {
	for _, hv := range d.Response.GetResponseHeadersToAdd() {
		if strings.EqualFold(hv.GetKey(), "Retry-After") {
			s, err := strconv.ParseUint(hv.GetValue(), 10, 32)
			if err != nil {
				return 0, false
			}
			return time.Duration(s) * time.Second, true
		}
	}
	return 0, false
}

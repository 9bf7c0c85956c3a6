package client

import (
	"context"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultTimeout bounds a decision when WithTimeout is not given: Envoy's
// rate limit filter's default.
const DefaultTimeout = 20 * time.Millisecond

// OnError is what a Limiter answers when its backend cannot decide (the
// store or the service is down, the deadline passed): the client-side
// counterpart of a rule's on_store_error, which the service applies first
// (a rule's allow or deny comes back as an answer, not an error).
type OnError uint8

const (
	// OnErrorAllow admits the request (fail open), as Envoy does by
	// default (failure_mode_deny: false).
	OnErrorAllow OnError = iota
	// OnErrorDeny denies it as over the limit (fail closed), without rate
	// limit headers since nothing was counted.
	OnErrorDeny
	// OnErrorUnavailable fails it: the middleware answers 503 or
	// UNAVAILABLE.
	OnErrorUnavailable
)

// Verdict is a Decision's outcome.
type Verdict uint8

const (
	// Admitted: the service answered OK, or could not decide under
	// OnErrorAllow.
	Admitted Verdict = iota + 1
	// Denied: the service answered OVER_LIMIT, or could not decide under
	// OnErrorDeny.
	Denied
	// Failed: no answer (OnErrorUnavailable, a malformed or oversized
	// request, or the caller gave up); Err says why.
	Failed
)

func (v Verdict) String() string {
	switch v {
	case Admitted:
		return "admitted"
	case Denied:
		return "denied"
	case Failed:
		return "failed"
	default:
		return "verdict(?)"
	}
}

// Limiter decides requests against a Backend within a deadline, answering
// by its OnError when the backend cannot. It is safe for concurrent use.
type Limiter struct {
	backend Backend
	timeout time.Duration
	onError OnError
}

// LimiterOption configures a Limiter.
type LimiterOption func(*Limiter)

// WithTimeout bounds each decision (DefaultTimeout otherwise); the caller's
// context may end it sooner. d <= 0 leaves only the caller's deadline.
func WithTimeout(d time.Duration) LimiterOption {
	return func(l *Limiter) { l.timeout = d }
}

// WithOnError sets the answer when the backend cannot decide; the default
// is OnErrorAllow.
func WithOnError(e OnError) LimiterOption {
	return func(l *Limiter) { l.onError = e }
}

// NewLimiter returns a Limiter deciding with b.
func NewLimiter(b Backend, opts ...LimiterOption) *Limiter {
	l := &Limiter{backend: b, timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(l)
	}
	return l
}

// Decide asks the backend about req. It never returns an error: a backend
// that cannot decide gives the Verdict OnError says, with Err set.
func (l *Limiter) Decide(ctx context.Context, req *rlsv3.RateLimitRequest) Decision {
	call := ctx
	if l.timeout > 0 {
		var cancel context.CancelFunc
		call, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	resp, err := l.backend.ShouldRateLimit(call, req)
	if err == nil {
		switch resp.GetOverallCode() {
		case rlsv3.RateLimitResponse_OK:
			return Decision{Verdict: Admitted, Response: resp}
		case rlsv3.RateLimitResponse_OVER_LIMIT:
			return Decision{Verdict: Denied, Response: resp}
		}
		// Envoy takes UNKNOWN for OK; ratelimitd never answers it, so it is
		// a fault, not a decision.
		err = status.Error(codes.Internal, "rate limit service answered overall_code UNKNOWN")
	}
	return l.undecided(ctx, err)
}

// undecided applies OnError to a backend error, except where failing open
// or closed would be wrong: the caller is gone, or the request is malformed
// (an over-long header value sent by a client must not let it skip its
// limit under OnErrorAllow). A request larger than the service's caps
// admit is malformed too: over gRPC, ratelimitd refuses it from its length
// prefix with RESOURCE_EXHAUSTED, which comes back as INVALID_ARGUMENT
// (unless it is the service's overload, see overloaded).
func (l *Limiter) undecided(ctx context.Context, err error) Decision {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Decision{Verdict: Failed, Err: status.FromContextError(ctxErr).Err()}
	}
	switch status.Code(err) {
	case codes.InvalidArgument:
		return Decision{Verdict: Failed, Err: err}
	case codes.ResourceExhausted:
		if !overloaded(err) {
			return Decision{Verdict: Failed, Err: status.Error(codes.InvalidArgument, "request too large: "+status.Convert(err).Message())}
		}
	}
	switch l.onError {
	case OnErrorAllow:
		return Decision{Verdict: Admitted, Err: err}
	case OnErrorDeny:
		return Decision{Verdict: Denied, Err: err}
	default:
		return Decision{Verdict: Failed, Err: err}
	}
}

// overloaded reports whether err is the service refusing a call past its
// MAX_CONCURRENT_REQUESTS (an ErrorInfo reason says so), which OnError
// decides like any other failure to answer.
func overloaded(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "OVERLOADED" {
			return true
		}
	}
	return false
}

// Check decides one request of domain with typed descriptors, for code
// that limits work other than a request it serves (a job, an outgoing
// call); hits is its hits_addend (0 counts one).
func (l *Limiter) Check(ctx context.Context, domain string, hits uint32, descriptors ...Descriptor) Decision {
	req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hits, Descriptors: make([]*ratelimitv3.RateLimitDescriptor, len(descriptors))}
	for i, d := range descriptors {
		req.Descriptors[i] = d.Proto()
	}
	return l.Decide(ctx, req)
}

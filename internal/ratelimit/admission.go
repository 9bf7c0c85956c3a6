package ratelimit

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// admission bounds the decisions in progress (MAX_CONCURRENT_REQUESTS) and
// how long each may take (REQUEST_TIMEOUT), so that a stalled Redis cannot
// pile up waiting calls until the process runs out of memory
// (envoyproxy/ratelimit#1241). Without bounds it only counts them.
type admission struct {
	// slots holds one token per decision in progress; nil: no cap.
	slots   chan struct{}
	timeout time.Duration

	inFlight atomic.Int64
	rejected atomic.Uint64
	timedOut atomic.Uint64
}

// OverloadedReason is the ErrorInfo reason of the RESOURCE_EXHAUSTED
// answered past MAX_CONCURRENT_REQUESTS, which tells it from gRPC's own
// RESOURCE_EXHAUSTED for a message over GRPC_MAX_RECV_MESSAGE_SIZE.
const OverloadedReason = "OVERLOADED"

// errOverloaded is the status past MAX_CONCURRENT_REQUESTS: the service
// refused the call without looking at it, as envoyproxy's #1241 does.
var errOverloaded = overloadedStatus()

func overloadedStatus() error {
	st := status.New(codes.ResourceExhausted, "overloaded: MAX_CONCURRENT_REQUESTS decisions are in progress")
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: OverloadedReason, Domain: "ratelimitd"}); err == nil {
		st = d
	}
	return st.Err()
}

// requestDeadline is the context key of the deadline REQUEST_TIMEOUT set.
type requestDeadline struct{}

// WithAdmission is MAX_CONCURRENT_REQUESTS and REQUEST_TIMEOUT: past
// maxConcurrent decisions in progress a call is refused at once with
// RESOURCE_EXHAUSTED, never queued; a decision still waiting for the store
// timeout after it began is answered UNAVAILABLE (or from its rules'
// on_store_error), as a store failure is. Zero leaves either unbounded.
func WithAdmission(maxConcurrent int, timeout time.Duration) Option {
	return func(s *Service) { s.admission = newAdmission(maxConcurrent, timeout) }
}

func newAdmission(maxConcurrent int, timeout time.Duration) *admission {
	a := &admission{timeout: max(timeout, 0)}
	if maxConcurrent > 0 {
		a.slots = make(chan struct{}, maxConcurrent)
	}
	return a
}

// admit takes a slot for a decision and bounds ctx by the timeout; the
// caller must call release with the cancel it returns (nil without a
// timeout) once the decision has returned, whatever happened to ctx. A
// call whose caller already gave up takes nothing. No closure: admit runs
// for every decision.
func (a *admission) admit(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, status.FromContextError(err).Err()
	}
	if a.slots != nil {
		select {
		case a.slots <- struct{}{}:
		default:
			a.rejected.Add(1)
			return nil, nil, errOverloaded
		}
	}
	a.inFlight.Add(1)
	var cancel context.CancelFunc
	if a.timeout > 0 {
		deadline := time.Now().Add(a.timeout)
		ctx, cancel = context.WithDeadline(context.WithValue(ctx, requestDeadline{}, deadline), deadline)
	}
	return ctx, cancel, nil
}

// release ends what admit began.
func (a *admission) release(cancel context.CancelFunc) {
	if cancel != nil {
		cancel()
	}
	a.inFlight.Add(-1)
	if a.slots != nil {
		<-a.slots
	}
}

// expired reports whether the deadline REQUEST_TIMEOUT set has passed,
// ending ctx before the caller's own: the store failure is then the
// service's to report as UNAVAILABLE, not the caller's deadline. The
// clock decides, not ctx.Err: a read timed out at the deadline may return
// before the context's timer fires.
func (a *admission) expired(ctx context.Context) bool {
	deadline, ok := ctx.Value(requestDeadline{}).(time.Time)
	if !ok || time.Now().Before(deadline) {
		return false
	}
	if caller, ok := ctx.Deadline(); ok && caller.Before(deadline) {
		return false
	}
	a.timedOut.Add(1)
	return true
}

// Admission reports the decisions in progress, the calls refused past
// MAX_CONCURRENT_REQUESTS and the decisions REQUEST_TIMEOUT ended.
func (s *Service) Admission() (inFlight int64, rejected, timedOut uint64) {
	a := s.admission
	return a.inFlight.Load(), a.rejected.Load(), a.timedOut.Load()
}

// Package queuegrpc serves a queue.Queue as ratelimitd.queue.v1.DelayQueue
// and, for tests and Go callers, adapts a DelayQueue client back into a
// queue.Queue.
package queuegrpc

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

var _ queuev1.DelayQueueServer = (*Server)(nil)

// Server is the DelayQueue service.
type Server struct {
	queuev1.UnimplementedDelayQueueServer
	q queue.Queue
}

// New serves q.
func New(q queue.Queue) *Server { return &Server{q: q} }

// toStatus maps errors to codes: bad input INVALID_ARGUMENT, a stale receipt
// FAILED_PRECONDITION, the caller's deadline as such, anything else
// (Redis down or timing out) UNAVAILABLE.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, queue.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, queue.ErrReceipt):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	default:
		return status.Error(codes.Unavailable, err.Error())
	}
}

// duration reads an optional Duration; nil is zero.
func duration(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "%s: %v", field, err)
	}
	v := d.AsDuration()
	if v < 0 {
		return 0, status.Errorf(codes.InvalidArgument, "%s: negative duration %s", field, v)
	}
	return v, nil
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// Enqueue implements queuev1.DelayQueueServer.
func (s *Server) Enqueue(ctx context.Context, r *queuev1.EnqueueRequest) (*queuev1.EnqueueResponse, error) {
	delay, err := duration("delay", r.GetDelay())
	if err != nil {
		return nil, err
	}
	req := queue.EnqueueRequest{Queue: r.GetQueue(), ID: r.GetId(), Payload: r.GetPayload(), Delay: delay}
	if at := r.GetDeliverAt(); at != nil {
		if err := at.CheckValid(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "deliver_at: %v", err)
		}
		req.DeliverAt = at.AsTime()
		if r.GetDelay() != nil {
			return nil, status.Error(codes.InvalidArgument, "delay and deliver_at are alternatives; set one")
		}
	}
	res, err := s.q.Enqueue(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return &queuev1.EnqueueResponse{Id: res.ID, DeliverAt: timestamp(res.DeliverAt), Duplicate: res.Duplicate}, nil
}

// Claim implements queuev1.DelayQueueServer.
func (s *Server) Claim(ctx context.Context, r *queuev1.ClaimRequest) (*queuev1.ClaimResponse, error) {
	vis, err := duration("visibility_timeout", r.GetVisibilityTimeout())
	if err != nil {
		return nil, err
	}
	wait, err := duration("wait", r.GetWait())
	if err != nil {
		return nil, err
	}
	n := r.GetMaxMessages()
	if n > queue.MaxClaim {
		n = queue.MaxClaim + 1 // still rejected, without overflowing int
	}
	msgs, err := s.q.Claim(ctx, queue.ClaimRequest{Queue: r.GetQueue(), Max: int(n), Visibility: vis, Wait: wait})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &queuev1.ClaimResponse{Messages: make([]*queuev1.Message, len(msgs))}
	for i, m := range msgs {
		out.Messages[i] = &queuev1.Message{
			Id: m.ID, Payload: m.Payload, DeliverAt: timestamp(m.DeliverAt),
			Attempt: m.Attempt, Receipt: m.Receipt, VisibleAt: timestamp(m.VisibleAt),
		}
	}
	return out, nil
}

// Ack implements queuev1.DelayQueueServer.
func (s *Server) Ack(ctx context.Context, r *queuev1.AckRequest) (*queuev1.AckResponse, error) {
	if err := s.q.Ack(ctx, r.GetQueue(), r.GetId(), r.GetReceipt()); err != nil {
		return nil, toStatus(err)
	}
	return &queuev1.AckResponse{}, nil
}

// Nack implements queuev1.DelayQueueServer.
func (s *Server) Nack(ctx context.Context, r *queuev1.NackRequest) (*queuev1.NackResponse, error) {
	delay, err := duration("delay", r.GetDelay())
	if err != nil {
		return nil, err
	}
	at, err := s.q.Nack(ctx, r.GetQueue(), r.GetId(), r.GetReceipt(), delay)
	if err != nil {
		return nil, toStatus(err)
	}
	return &queuev1.NackResponse{DeliverAt: timestamp(at)}, nil
}

// Extend implements queuev1.DelayQueueServer.
func (s *Server) Extend(ctx context.Context, r *queuev1.ExtendRequest) (*queuev1.ExtendResponse, error) {
	vis, err := duration("visibility_timeout", r.GetVisibilityTimeout())
	if err != nil {
		return nil, err
	}
	at, err := s.q.Extend(ctx, r.GetQueue(), r.GetId(), r.GetReceipt(), vis)
	if err != nil {
		return nil, toStatus(err)
	}
	return &queuev1.ExtendResponse{VisibleAt: timestamp(at)}, nil
}

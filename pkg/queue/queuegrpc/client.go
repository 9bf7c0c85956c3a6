package queuegrpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

var _ queue.Queue = (*Client)(nil)

// Client is a queue.Queue over a DelayQueue connection; INVALID_ARGUMENT and
// FAILED_PRECONDITION come back as queue.ErrInvalid and queue.ErrReceipt.
type Client struct{ c queuev1.DelayQueueClient }

// NewClient wraps c.
func NewClient(c queuev1.DelayQueueClient) *Client { return &Client{c: c} }

func fromStatus(err error) error {
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %v", queue.ErrInvalid, err)
	case codes.FailedPrecondition:
		return fmt.Errorf("%w: %v", queue.ErrReceipt, err)
	default:
		return err
	}
}

// dur leaves zero unset, as a caller of the API would; negative values are
// sent as they are, for the server to refuse.
func dur(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// Enqueue implements queue.Queue.
func (c *Client) Enqueue(ctx context.Context, req queue.EnqueueRequest) (queue.EnqueueResult, error) {
	r := &queuev1.EnqueueRequest{Queue: req.Queue, Id: req.ID, Payload: req.Payload, Delay: dur(req.Delay)}
	if !req.DeliverAt.IsZero() {
		r.DeliverAt = timestamppb.New(req.DeliverAt)
	}
	res, err := c.c.Enqueue(ctx, r)
	if err != nil {
		return queue.EnqueueResult{}, fromStatus(err)
	}
	return queue.EnqueueResult{ID: res.GetId(), DeliverAt: res.GetDeliverAt().AsTime(), Duplicate: res.GetDuplicate()}, nil
}

// Claim implements queue.Queue.
func (c *Client) Claim(ctx context.Context, req queue.ClaimRequest) ([]queue.Message, error) {
	if req.Max < 0 {
		return nil, fmt.Errorf("%w: max_messages %d", queue.ErrInvalid, req.Max)
	}
	res, err := c.c.Claim(ctx, &queuev1.ClaimRequest{
		Queue: req.Queue, MaxMessages: uint32(req.Max), VisibilityTimeout: dur(req.Visibility), Wait: dur(req.Wait),
	})
	if err != nil {
		return nil, fromStatus(err)
	}
	var out []queue.Message
	for _, m := range res.GetMessages() {
		out = append(out, queue.Message{
			ID: m.GetId(), Payload: m.GetPayload(), DeliverAt: m.GetDeliverAt().AsTime(),
			Attempt: m.GetAttempt(), Receipt: m.GetReceipt(), VisibleAt: m.GetVisibleAt().AsTime(),
		})
	}
	return out, nil
}

// Ack implements queue.Queue.
func (c *Client) Ack(ctx context.Context, q, id, receipt string) error {
	_, err := c.c.Ack(ctx, &queuev1.AckRequest{Queue: q, Id: id, Receipt: receipt})
	return fromStatus(err)
}

// Nack implements queue.Queue.
func (c *Client) Nack(ctx context.Context, q, id, receipt string, delay time.Duration) (time.Time, error) {
	res, err := c.c.Nack(ctx, &queuev1.NackRequest{Queue: q, Id: id, Receipt: receipt, Delay: dur(delay)})
	if err != nil {
		return time.Time{}, fromStatus(err)
	}
	return res.GetDeliverAt().AsTime(), nil
}

// Extend implements queue.Queue.
func (c *Client) Extend(ctx context.Context, q, id, receipt string, visibility time.Duration) (time.Time, error) {
	res, err := c.c.Extend(ctx, &queuev1.ExtendRequest{Queue: q, Id: id, Receipt: receipt, VisibilityTimeout: dur(visibility)})
	if err != nil {
		return time.Time{}, fromStatus(err)
	}
	return res.GetVisibleAt().AsTime(), nil
}

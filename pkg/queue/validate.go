package queue

import (
	"fmt"
	"time"
)

// Limits on input, documented in docs/queue.md. Queue names are
// restricted so that they can sit inside a Redis Cluster hash tag.
const (
	MaxQueueName      = 80
	MaxID             = 128
	MaxPayload        = 256 << 10
	MaxDelay          = 7 * 24 * time.Hour
	MaxClaim          = 100
	DefaultVisibility = 30 * time.Second
	MaxVisibility     = 12 * time.Hour
	MaxWait           = 20 * time.Second
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// ValidQueue accepts 1..MaxQueueName characters of [A-Za-z0-9_.:-].
func ValidQueue(name string) error {
	if name == "" {
		return invalid("empty queue name")
	}
	if len(name) > MaxQueueName {
		return invalid("queue name longer than %d bytes", MaxQueueName)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-'
		if !ok {
			return invalid("queue name %q: only letters, digits and _ . : - are allowed", name)
		}
	}
	return nil
}

func validID(id string) error {
	if id == "" {
		return invalid("empty message id")
	}
	if len(id) > MaxID {
		return invalid("message id longer than %d bytes", MaxID)
	}
	return nil
}

func validDelay(what string, d time.Duration) error {
	if d < 0 {
		return invalid("negative %s %s", what, d)
	}
	if d > MaxDelay {
		return invalid("%s %s over the maximum %s", what, d, MaxDelay)
	}
	return nil
}

// ValidateEnqueue checks req; now is the caller's estimate of the store's
// clock, only used to bound DeliverAt. An empty ID is allowed: the store
// generates one.
func ValidateEnqueue(req EnqueueRequest, now time.Time) error {
	if err := ValidQueue(req.Queue); err != nil {
		return err
	}
	if req.ID != "" {
		if err := validID(req.ID); err != nil {
			return err
		}
	}
	if len(req.Payload) > MaxPayload {
		return invalid("payload of %d bytes over the maximum %d", len(req.Payload), MaxPayload)
	}
	if req.Delay != 0 && !req.DeliverAt.IsZero() {
		return invalid("delay and deliver_at are alternatives; set one")
	}
	if !req.DeliverAt.IsZero() {
		return validDelay("deliver_at distance", max(req.DeliverAt.Sub(now), 0))
	}
	return validDelay("delay", req.Delay)
}

// ValidateClaim checks req and returns its visibility timeout with the
// default applied.
func ValidateClaim(req ClaimRequest) (time.Duration, error) {
	if err := ValidQueue(req.Queue); err != nil {
		return 0, err
	}
	if req.Max <= 0 || req.Max > MaxClaim {
		return 0, invalid("max_messages %d outside 1..%d", req.Max, MaxClaim)
	}
	if req.Wait < 0 || req.Wait > MaxWait {
		return 0, invalid("wait %s outside 0..%s", req.Wait, MaxWait)
	}
	vis := req.Visibility
	if vis == 0 {
		vis = DefaultVisibility
	}
	if vis < 0 || vis > MaxVisibility {
		return 0, invalid("visibility_timeout %s outside 0..%s", vis, MaxVisibility)
	}
	return vis, nil
}

// ValidateReceipt checks the arguments Ack, Nack and Extend share.
func ValidateReceipt(queue, id, receipt string) error {
	if err := ValidQueue(queue); err != nil {
		return err
	}
	if err := validID(id); err != nil {
		return err
	}
	if receipt == "" {
		return invalid("empty receipt")
	}
	return nil
}

// ValidateNack checks Nack's arguments.
func ValidateNack(queue, id, receipt string, delay time.Duration) error {
	if err := ValidateReceipt(queue, id, receipt); err != nil {
		return err
	}
	return validDelay("delay", delay)
}

// ValidateExtend checks Extend's arguments; zero makes the message visible
// again at once.
func ValidateExtend(queue, id, receipt string, visibility time.Duration) error {
	if err := ValidateReceipt(queue, id, receipt); err != nil {
		return err
	}
	if visibility < 0 || visibility > MaxVisibility {
		return invalid("visibility_timeout %s outside 0..%s", visibility, MaxVisibility)
	}
	return nil
}

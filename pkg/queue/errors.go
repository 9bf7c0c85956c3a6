package queue

import "errors"

var (
	// ErrInvalid wraps every rejected input; nothing was changed.
	ErrInvalid = errors.New("invalid queue request")
	// ErrReceipt means the receipt is not the one of the message's current
	// claim (redelivered, acked, expired or never issued); nothing was changed.
	ErrReceipt = errors.New("receipt does not match a current claim")
)

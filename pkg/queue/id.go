package queue

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns a random 128-bit id for a message enqueued without one, and
// the unguessable part of receipts.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b[:])
}

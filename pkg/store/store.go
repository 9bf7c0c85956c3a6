// Package store defines how the service asks a backend for rate-limit
// decisions. Implementations: memstore (embedded) and redisstore.
package store

import (
	"context"
	"errors"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Request charges Hits against Key under Limit (Hits == 0 only checks);
// its Mode says whether its denial denies the batch. It is algorithms.Op:
// one type from the service down to the Lua encoder.
type Request = algorithms.Op

// Result is the decision for the Request at the same index.
type Result struct {
	algorithms.Decision
	// FromCache says a local over-limit cache answered without the
	// backend (see pkg/store/localcache).
	FromCache bool
}

// Store decides a batch of requests atomically with the semantics of
// algorithms.TakeAll: all-or-nothing, in one round trip to its backend.
// Whether the batch was denied is algorithms.VerdictOf(reqs, results).
type Store interface {
	// Take returns one Result per Request, in order. An error is a backend
	// failure (unreachable, timeout, script error), never "over limit".
	Take(ctx context.Context, reqs []Request) ([]Result, error)
	// Close releases the backend's resources.
	Close() error
}

// ErrBadCursor is a listing cursor the store did not issue (the counters
// API answers it with INVALID_ARGUMENT).
var ErrBadCursor = errors.New("bad page token")

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

// Charge is what an admitted batch charged one key: the hits and the
// state written, which is what taking part of it back exactly needs
// (algorithms.Undo). It is algorithms.KeyCharge, the type the Go reference
// (algorithms.Charges) and the script's reply both produce.
type Charge = algorithms.KeyCharge

// Lender is a Store that also tells what an admitted batch charged and
// takes part of a charge back: what leases need (pkg/store/lease).
type Lender interface {
	Store
	// TakeCharged is Take, also returning, when the batch was admitted, one
	// Charge per key it charged (none for a key its usage ops charged: usage
	// is never given back). A denied batch returns no charges.
	TakeCharged(ctx context.Context, reqs []Request) ([]Result, []Charge, error)
	// Return takes back each charge's Hits as algorithms.Undo does: never
	// more room than if the hits had not been charged. An error may leave
	// some of them charged (under-admission, never over-admission).
	Return(ctx context.Context, charges []Charge) error
}

// ErrBadCursor is a listing cursor the store did not issue (the counters
// API answers it with INVALID_ARGUMENT).
var ErrBadCursor = errors.New("bad page token")

// Package store defines how the service asks a backend for rate-limit
// decisions. Implementations: memstore (embedded) and redisstore.
package store

import (
	"context"
	"errors"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Request charges Hits against Key under Limit (Hits == 0 only checks);
// its Mode says whether its denial denies the batch. Its first fields are
// algorithms.Op's, which Op returns; Lease is for the lease decorator.
type Request struct {
	Key   string
	Limit algorithms.Limit
	Hits  uint64
	Mode  algorithms.Mode
	// Usage, Joined: see algorithms.Op.
	Usage  bool
	Joined bool
	// Lease says the request's rule lets a replica lease blocks of its
	// counter (pkg/store/lease). Only that decorator reads it; stores
	// ignore it.
	Lease bool
	// Fallback is what the request answers when the backend cannot
	// decide its batch. Only the fallback decorator (pkg/store/fallback)
	// reads it; stores ignore it.
	Fallback Fallback
}

// Op is r as the algorithms take it.
func (r Request) Op() algorithms.Op {
	return algorithms.Op{Key: r.Key, Limit: r.Limit, Hits: r.Hits, Mode: r.Mode, Usage: r.Usage, Joined: r.Joined}
}

// Ops is reqs as the algorithms take them.
func Ops(reqs []Request) []algorithms.Op {
	ops := make([]algorithms.Op, len(reqs))
	for i, r := range reqs {
		ops[i] = r.Op()
	}
	return ops
}

// Result is the decision for the Request at the same index.
type Result struct {
	algorithms.Decision
	// Applied is what the request did to its counter (algorithms.Batch's
	// Applied): the hits it charged, what a record past the limit really
	// charged, what a refund gave back; 0 for a request its batch's denial
	// left uncharged. A lease's local admission reports its hits, charged
	// with the block.
	Applied uint64
	// FromCache says a local over-limit cache answered without the
	// backend (see pkg/store/localcache).
	FromCache bool
	// CachedDenial says the local cache held this denial, though the
	// backend was asked for the batch's other requests and confirmed it:
	// envoyproxy counts it over_limit_with_local_cache.
	CachedDenial bool
	// Local says the fallback decorator decided the batch in this
	// process's memory, the backend being unable to (see
	// pkg/store/fallback).
	Local bool
}

// Store decides a batch of requests atomically with the semantics of
// algorithms.TakeAll: all-or-nothing, in one round trip to its backend.
// Whether the batch was denied is VerdictOf(reqs, results).
type Store interface {
	// Take returns one Result per Request, in order. An error is a backend
	// failure (unreachable, timeout, script error), never "over limit".
	Take(ctx context.Context, reqs []Request) ([]Result, error)
	// Close releases the backend's resources.
	Close() error
}

// Charge is what an admitted batch charged one key: what its ops applied
// there and the state written, which is what taking it back exactly needs
// (algorithms.Undo). It is algorithms.Charge, the type the Go reference
// (algorithms.Batch's Charges) and the script's reply both produce.
type Charge = algorithms.Charge

// Lender is a Store that also tells what an admitted batch charged and
// takes part of a charge back: what leases need (pkg/store/lease).
type Lender interface {
	Store
	// TakeCharged is Take, also returning, when the batch was admitted, one
	// Charge per key its ops but usage and refunds changed
	// (algorithms.Batch's Charges: usage is never given back). A denied
	// batch returns no charges.
	TakeCharged(ctx context.Context, reqs []Request) ([]Result, []Charge, error)
	// Return takes back each charge's Applied (or less: a lease gives back
	// its unused hits) as algorithms.Undo does: exactly, while nothing else
	// touched the key, and never more room than if it had not been
	// charged. An error may leave some of them charged (under-admission,
	// never over-admission).
	Return(ctx context.Context, charges []Charge) error
}

// ErrBadCursor is a listing cursor the store did not issue (the counters
// API answers it with INVALID_ARGUMENT).
var ErrBadCursor = errors.New("bad page token")

// VerdictOf is the algorithms.Verdict of reqs decided as res (same length
// and order), read in place.
func VerdictOf(reqs []Request, res []Result) algorithms.Verdict {
	var v algorithms.Verdict
	for i, r := range reqs {
		v.Add(r.Mode, r.Joined, res[i].Allowed)
	}
	return v
}

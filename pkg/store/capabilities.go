package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// What a store can do beyond Take (Lender, Admin, Forgetter,
// RefundWatcher). The stores implement what their backend can; a decorator
// embeds Decorator, which passes each to the store it wraps
// (ErrUnsupported when that store cannot), so that a stack of decorators
// offers what the store at its bottom offers.

// Admin is a store whose counters can be reset and listed: what the
// counters API (docs/counters.md) needs.
type Admin interface {
	Store
	// Reset deletes keys; existed[i] says keys[i] held a live state.
	Reset(ctx context.Context, keys []string) (existed []bool, err error)
	// List pages through the keys under prefix, at most about count a
	// page, stopping early at until; next is "" at the end. A cursor the
	// store did not issue is ErrBadCursor.
	List(ctx context.Context, prefix, cursor string, count int, until time.Time) (keys []string, next string, err error)
}

// Forgetter is a store that remembers keys beside its backend (a local
// cache's denials, a lease's blocks, a fallback's local counts): Forget
// drops them, as a reset of those keys must.
type Forgetter interface {
	Forget(keys ...string)
}

// RefundWatcher is a store whose replicas publish the keys a refund, an
// undo, a lease's return or a reset gave room back to: WatchRefunds calls
// drop with them until ctx ends, and flush when notices may have been
// missed (a reconnect), so that a cache of denials drops what may be
// lifted.
type RefundWatcher interface {
	WatchRefunds(ctx context.Context, drop func(keys ...string), flush func()) error
}

// ErrUnsupported is a capability the store under a decorator lacks.
var ErrUnsupported = errors.New("not supported by the store")

// Decorator is embedded by a store that wraps another: it passes every
// capability to that store, so that the decorator implements them all.
type Decorator struct{ next Store }

// Decorate is the Decorator passing capabilities to next.
func Decorate(next Store) Decorator { return Decorator{next} }

// Unwrap is the wrapped store, for tests and diagnostics that look at a
// stack's layers (its capabilities need no unwrapping).
func (d Decorator) Unwrap() Store { return d.next }

// TakeCharged is the wrapped store's: what it lends is the caller's to
// hold, not the decorator's.
func (d Decorator) TakeCharged(ctx context.Context, reqs []Request) ([]Result, []Charge, error) {
	l, ok := d.next.(Lender)
	if !ok {
		return nil, nil, d.unsupported("lending")
	}
	return l.TakeCharged(ctx, reqs)
}

// Return is the wrapped store's.
func (d Decorator) Return(ctx context.Context, charges []Charge) error {
	l, ok := d.next.(Lender)
	if !ok {
		return d.unsupported("returning")
	}
	return l.Return(ctx, charges)
}

// Reset is the wrapped store's.
func (d Decorator) Reset(ctx context.Context, keys []string) ([]bool, error) {
	a, ok := d.next.(Admin)
	if !ok {
		return nil, d.unsupported("resetting")
	}
	return a.Reset(ctx, keys)
}

// List is the wrapped store's.
func (d Decorator) List(ctx context.Context, prefix, cursor string, count int, until time.Time) ([]string, string, error) {
	a, ok := d.next.(Admin)
	if !ok {
		return nil, "", d.unsupported("listing")
	}
	return a.List(ctx, prefix, cursor, count, until)
}

// Forget is the wrapped store's, if it has one: a decorator that
// remembers keys itself drops them, then calls this.
func (d Decorator) Forget(keys ...string) {
	if f, ok := d.next.(Forgetter); ok {
		f.Forget(keys...)
	}
}

func (d Decorator) unsupported(what string) error {
	return fmt.Errorf("store: %s: %T: %w", what, d.next, ErrUnsupported)
}

// Package scripts runs the Lua mirror of pkg/algorithms in Redis: one
// script decides a whole batch of ops atomically and all-or-nothing, with
// the semantics of algorithms.TakeAll, in a single FCALL of a Redis 7
// FUNCTION library (library.go), or EVALSHA where FUNCTION is refused.
//
// The script is assembled from one file per algorithm plus a driver
// (lua/take.lua documents the KEYS/ARGV/reply protocol). Every algorithm
// computes with integers below 2^53, where Lua's binary64 numbers are exact,
// so Go and Lua agree bit for bit; the differential tests prove it on a real
// redis-server.
package scripts

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Scripter is the subset of go-redis the runner needs; *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient satisfy it.
// Runner calls are one script each; a caller that pipelines EvalSha(Hash(),
// Encode(...)) itself must load Source() first and handle NOSCRIPT (after a
// restart or SCRIPT FLUSH) by loading it again, which Runner does for you.
type Scripter = redis.Scripter

// Runner runs the take and undo scripts: as FCALL of the FUNCTION library
// (Library) where the server has FUNCTION (Redis 7), else as EVALSHA. It is
// safe for concurrent use; use one Runner per client, since it remembers
// whether that client's servers refuse FUNCTION.
type Runner struct {
	script *redis.Script
	undo   *redis.Script
	// evalOnly: FCALL or FUNCTION LOAD was refused (Redis 6, or an ACL
	// without them), or WithoutFunctions; from then on EVALSHA only.
	evalOnly atomic.Bool
	// lifted: WithLiftedRefunds.
	lifted func(keys []string)
}

// RunnerOption configures NewRunner.
type RunnerOption func(*Runner)

// WithoutFunctions makes the Runner use EVALSHA only, never FCALL.
func WithoutFunctions() RunnerOption {
	return func(r *Runner) { r.evalOnly.Store(true) }
}

// NewRunner builds a Runner around the assembled scripts.
func NewRunner(opts ...RunnerOption) *Runner {
	r := &Runner{script: redis.NewScript(source), undo: redis.NewScript(undoSource)}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// UsesFunctions reports whether the Runner still calls FCALL (it has not
// fallen back to EVALSHA).
func (r *Runner) UsesFunctions() bool { return !r.evalOnly.Load() }

// Hash is the SHA1 of the take script, which the EVALSHA fallback calls
// (see Scripter). On a cluster every op's key must map to one slot, as for
// any script.
func (r *Runner) Hash() string { return r.script.Hash() }

// Source is the assembled Lua script.
func Source() string { return source }

// Take decides ops as ONE atomic, all-or-nothing FCALL (see call for the
// library load and the EVALSHA fallback). A zero now means "use Redis TIME", the
// production setting; tests pass an explicit now. The decisions and the
// amounts applied are exactly those of algorithms.TakeAll over the keys'
// stored states.
func (r *Runner) Take(ctx context.Context, rdb Scripter, ops []algorithms.Op, now time.Time) (Outcome, error) {
	return r.take(ctx, rdb, ops, now, 0)
}

// TakeCharged is Take (the same single FCALL) that also returns what the
// batch charged (Outcome.Charges): algorithms.Batch's Charges, none when
// it was denied. A caller that must deny the request after all (another
// Cluster slot group denied it) passes them to Undo.
func (r *Runner) TakeCharged(ctx context.Context, rdb Scripter, ops []algorithms.Op, now time.Time) (Outcome, error) {
	return r.take(ctx, rdb, ops, now, chargedMarker)
}

// TakeDenials is TakeCharged (the same single FCALL) for one slot group of a
// Cluster request whose keys span slots: it also returns, per op, the
// decision it reports and what it applies had the batch been denied
// (algorithms.TakeAll's for a denied batch: a check for an allowed op,
// what usage recorded for a usage op), which is the op's answer when
// another group denies the request. For a batch the script denied they
// are its own.
func (r *Runner) TakeDenials(ctx context.Context, rdb Scripter, ops []algorithms.Op, now time.Time) (Outcome, error) {
	return r.take(ctx, rdb, ops, now, deniedMarker)
}

// take is one take, and its reply decoded; more asks for more in the
// reply: chargedMarker (WithCharges) or deniedMarker (WithDenials), or 0.
func (r *Runner) take(ctx context.Context, rdb Scripter, ops []algorithms.Op, now time.Time, more int) (Outcome, error) {
	reply, err := r.run(ctx, rdb, ops, now, more)
	if err != nil || reply == nil {
		return Outcome{Decisions: []algorithms.Decision{}, Applied: []uint64{}}, err
	}
	return Decode(reply, ops, more != 0, more == deniedMarker)
}

// run is one take; a nil reply means there were no ops. more, if not 0,
// is ARGV[3]: what more the reply holds (take's).
func (r *Runner) run(ctx context.Context, rdb Scripter, ops []algorithms.Op, now time.Time, more int) (any, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	keys, args, err := Encode(ops, now)
	if err != nil {
		return nil, err
	}
	if more != 0 {
		args = append(args, more)
	}
	reply, err := r.call(ctx, rdb, takeFunction, r.script, keys, args)
	if err != nil {
		return nil, fmt.Errorf("take script: %w", err)
	}
	r.liftedRefunds(reply, ops)
	return reply, nil
}

// Undo takes back charges as ONE atomic call of the undo function (every
// key must be in one Cluster slot). A zero now means Redis TIME. However
// late it runs, it never leaves more room than the keys would have had
// without the charges. It is not idempotent: run it at most once per
// charge (retry it only when it certainly did not run).
func (r *Runner) Undo(ctx context.Context, rdb Scripter, charges []Charge, now time.Time) error {
	if len(charges) == 0 {
		return nil
	}
	keys, args, err := EncodeUndo(charges, now)
	if err != nil {
		return err
	}
	if _, err := r.call(ctx, rdb, undoFunction, r.undo, keys, args); err != nil {
		return fmt.Errorf("undo script: %w", err)
	}
	return nil
}

// UndoSource is the assembled undo script.
func UndoSource() string { return undoSource }

// Package scripts runs the Lua mirror of pkg/algorithms in Redis: one
// script decides a whole batch of ops atomically and all-or-nothing, with
// the semantics of algorithms.TakeAll, in a single EVALSHA.
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
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Scripter is the subset of go-redis the runner needs; *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient satisfy it.
// (To pipeline several takes, queue EvalSha(Hash(), Encode(...)) yourself and
// Decode each reply.)
type Scripter = redis.Scripter

// Runner runs the take script. It is safe for concurrent use.
type Runner struct {
	script *redis.Script
}

// NewRunner builds a Runner around the assembled script.
func NewRunner() *Runner {
	return &Runner{script: redis.NewScript(source)}
}

// Hash is the SHA1 of the script, for EVALSHA in a pipeline. On a cluster
// every op's key must map to one slot (use a hash tag), as for any script.
func (r *Runner) Hash() string { return r.script.Hash() }

// Source is the assembled Lua script.
func Source() string { return source }

// Take decides ops as ONE atomic, all-or-nothing EVALSHA (falling back to
// EVAL when Redis answers NOSCRIPT). A zero now means "use Redis TIME", the
// production setting; tests pass an explicit now. The decisions are exactly
// those of algorithms.TakeAll over the keys' stored states.
func (r *Runner) Take(ctx context.Context, rdb Scripter, ops []algorithms.Op, now time.Time) ([]algorithms.Decision, error) {
	if len(ops) == 0 {
		return []algorithms.Decision{}, nil
	}
	keys, args, err := Encode(ops, now)
	if err != nil {
		return nil, err
	}
	reply, err := r.script.Run(ctx, rdb, keys, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("scripts: take %d keys: %w", len(ops), err)
	}
	return Decode(reply, len(ops))
}

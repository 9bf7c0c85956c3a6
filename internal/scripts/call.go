package scripts

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// functionCaller is what FCALL needs of a client beyond Scripter; every
// go-redis client has it, so a Scripter without it just uses EVALSHA.
type functionCaller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FunctionLoadReplace(ctx context.Context, code string) *redis.StringCmd
}

// masterForKey is a Cluster client: it routes FCALL to the master of the
// first key's slot, so that is the node to load the library on.
type masterForKey interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
}

// call runs one script: FCALL fn, loading the library on the node first when
// it does not have it (a fresh server, a restart, a failover to a replica
// that never got it, FUNCTION FLUSH: "Function not found" certainly ran
// nothing), and retrying once; or, when the server refuses FUNCTION, script
// by EVALSHA (EVAL on NOSCRIPT), now and from then on.
func (r *Runner) call(ctx context.Context, rdb Scripter, fn string, script *redis.Script, keys []string, args []any) (any, error) {
	fc, ok := rdb.(functionCaller)
	if ok && !r.evalOnly.Load() {
		reply, err := fc.FCall(ctx, fn, keys, args...).Result()
		switch {
		case err == nil:
			return reply, nil
		case refused(err):
			r.evalOnly.Store(true)
		case FunctionMissing(err):
			switch err := load(ctx, rdb, fc, keys[0]); {
			case err == nil:
				return fc.FCall(ctx, fn, keys, args...).Result()
			case refused(err):
				r.evalOnly.Store(true)
			default:
				return nil, err
			}
		default:
			return nil, err
		}
	}
	return script.Run(ctx, rdb, keys, args...).Result()
}

// load puts the library on the node that serves key.
func load(ctx context.Context, rdb Scripter, fc functionCaller, key string) error {
	if c, ok := rdb.(masterForKey); ok {
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		fc = node
	}
	if err := fc.FunctionLoadReplace(ctx, library).Err(); err != nil {
		return fmt.Errorf("function load: %w", err)
	}
	return nil
}

// FunctionMissing reports whether err is FCALL's answer on a server that
// does not hold the function (it certainly ran nothing).
func FunctionMissing(err error) bool {
	return redis.HasErrorPrefix(err, "Function not found")
}

// refused reports whether the server refuses FUNCTION itself: a server
// before Redis 7 ("unknown command"), or an ACL denying FCALL or FUNCTION.
func refused(err error) bool {
	return redis.HasErrorPrefix(err, "unknown command") || redis.HasErrorPrefix(err, "NOPERM")
}

package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
)

// DefaultBatchLimit is REDIS_BATCH_LIMIT's default: the most takes one
// script call decides. Redis runs nothing else during a call, so the cap
// bounds how long one call holds it (about 64 x 4 us for one-counter
// takes); 50 callers on one replica rarely queue more.
const DefaultBatchLimit = 64

// WithBatchLimit is REDIS_BATCH_LIMIT: at most n takes of a pipeline share
// one script call; more make several calls in the same pipeline. n < 1
// means DefaultBatchLimit.
func WithBatchLimit(n int) Option {
	return func(s *settings) {
		s.batchLimit = n
		if n < 1 {
			s.batchLimit = DefaultBatchLimit
		}
	}
}

// merged is one FCALL of the takes function standing for several callers'
// takes in a pipeline (scripts.MergeTakes): Redis enters one function and
// reads TIME once for all of them, instead of once per take. Takes that ask
// for their charges (TakeCharged: a lease's top-ups) or their denials (a
// Cluster slot group of a request spanning slots, takeSpread) merge too,
// each still getting its own reply.
type merged struct {
	cmd   *redis.Cmd
	calls []*pendingCall
}

// mergeGroup is what takes must share to merge: their now, and on a
// Cluster node their slot (a script's keys must all be in one slot there;
// a take's are already).
type mergeGroup struct {
	now  int64
	slot int
}

// queue adds live's commands to pipe: the takes of each group as merged
// calls of at most batch takes each, in arrival order, anything else (and a
// take alone) as it is. Like every pipelined command, a merged call is
// never retried.
func queue(ctx context.Context, pipe redis.Pipeliner, live []*pendingCall, slotted bool, batch int) []merged {
	var groups map[mergeGroup][]*pendingCall
	for _, p := range live {
		now, key, ok := scripts.Mergeable(p.cmd.Args())
		if !ok {
			_ = pipe.Process(ctx, onceCmd{p.cmd})
			continue
		}
		g := mergeGroup{now: now, slot: -1}
		if slotted {
			g.slot = Slot(key)
		}
		if groups == nil {
			groups = make(map[mergeGroup][]*pendingCall, 1)
		}
		groups[g] = append(groups[g], p)
	}
	var out []merged
	for _, group := range groups {
		for len(group) > 0 {
			calls := group[:min(batch, len(group))]
			group = group[len(calls):]
			if len(calls) == 1 {
				_ = pipe.Process(ctx, onceCmd{calls[0].cmd})
				continue
			}
			args := make([][]any, len(calls))
			for i, p := range calls {
				args[i] = p.cmd.Args()
			}
			m := merged{cmd: redis.NewCmd(ctx, scripts.MergeTakes(args)...), calls: calls}
			_ = pipe.Process(ctx, onceCmd{m.cmd})
			out = append(out, m)
		}
	}
	return out
}

// split gives each caller its own take's reply or error from the merged
// call's.
func (m merged) split() {
	vals, errs := scripts.SplitTakes(m.cmd.Val(), m.cmd.Err(), len(m.calls))
	for i, p := range m.calls {
		if errs[i] != nil {
			p.cmd.SetErr(errs[i])
			continue
		}
		p.cmd.SetVal(vals[i])
	}
}

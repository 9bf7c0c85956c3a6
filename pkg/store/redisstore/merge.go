package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
)

// merged is one FCALL of the takes function standing for several callers'
// takes in a pipeline (scripts.MergeTakes): Redis enters one function and
// reads TIME once for all of them, instead of once per take. Takes that ask
// for their charges (TakeCharged: a lease's top-ups) merge too, each still
// getting its own reply; a Cluster slot group asking for its denials
// (takeSpread) goes alone.
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

// queue adds live's commands to pipe: the takes of each group as one merged
// call, anything else (and a take alone in its group) as it is. Like every
// pipelined command, a merged call is never retried.
func queue(ctx context.Context, pipe redis.Pipeliner, live []*pendingCall, slotted bool) []merged {
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
	for _, calls := range groups {
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

package scripts_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// TestMergedRepliesAsAlone: a merged call of takes with and without
// charges (a lease's top-ups among plain takes) gives each take exactly the
// reply that take's own FCALL gives on identical Redis state (its
// decisions, then its charges when it asked for them, value for value), and
// leaves identical state: one server runs each group merged, a second runs
// the same takes one FCALL after the other, for every algorithm, with keys
// repeated within and across takes and Spare ops riding on a key's other
// ops, as a top-up does.
func TestMergedRepliesAsAlone(t *testing.T) {
	keys := []string{"r:a", "r:b", "r:c", "r:d"}
	for i := range 12 {
		keys = append(keys, "r:wide"+strconv.Itoa(i))
	}
	r := newMergeRig(t, keys)
	lims := map[algorithms.Algorithm]algorithms.Limit{}
	now := int64(1_700_000_000_000_000)
	for group := range 400 {
		now += r.rng.Int64N(2_000_000)
		if group%50 == 0 {
			for _, alg := range algorithms.All() {
				lims[alg] = randomLimit(r.rng, alg)
			}
		}
		takes := make([][]algorithms.Op, 2+r.rng.IntN(7))
		calls := make([][]any, len(takes))
		asks := make([]int, len(takes))
		for i := range takes {
			alg := algorithms.All()[r.rng.IntN(len(algorithms.All()))]
			if group%2 == 1 && r.rng.IntN(5) != 0 {
				// Mostly fixed_window: several takes of its fast path on
				// the same keys in one call.
				alg = algorithms.FixedWindow
			}
			// Charges or denials (a Cluster slot group's) in a third each.
			asks[i] = r.rng.IntN(3)
			takes[i] = r.draw(lims[alg])
			calls[i] = mergeableCallAsking(t, takes[i], now, asks[i])
		}
		r.compare(group, takes, calls, asks)
	}
	if r.denials < 50 {
		t.Errorf("only %d merged takes with denials answered a denial: too few to judge", r.denials)
	}
	if r.packed < 50 {
		t.Errorf("only %d merged replies packed: the fast path barely ran", r.packed)
	}
	for alg, c := range r.cover {
		t.Logf("%s: %d charged takes charged, %d charges include a Spare op's hits", alg, c.charged, c.spare)
		if c.charged < 5 || c.spare < 3 {
			t.Errorf("%s: %d charged takes charged, %d charges include a Spare op's hits: too few to judge", alg, c.charged, c.spare)
		}
	}
}

// newMergeRig is a rig on two servers running RecordingLibrary, on keys.
func newMergeRig(t *testing.T, keys []string) *mergeRig {
	// Keys written without their TTLs (RecordingLibrary), as in
	// TestMergedTakes; the take function's reply is {reply, TTLs} there.
	lib, _, ok := scripts.RecordingLibrary()
	if !ok {
		t.Fatal("RecordingLibrary no longer matches the library")
	}
	r := &mergeRig{t: t, merged: newRedis(t), alone: newRedis(t), rng: newRand(t), keys: keys, cover: map[algorithms.Algorithm]*mergeSeen{}}
	for _, rdb := range []*redis.Client{r.merged, r.alone} {
		if err := rdb.FunctionLoadReplace(context.Background(), lib).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, alg := range algorithms.All() {
		r.cover[alg] = &mergeSeen{}
	}
	return r
}

// mergeSeen is, per algorithm, how many charged takes charged something and
// how many charges include a key's admitted Spare op.
type mergeSeen struct{ charged, spare int }

// mergeRig runs takes merged into one call on one server and one by one on
// another, on the same keys.
type mergeRig struct {
	t             *testing.T
	merged, alone *redis.Client
	rng           *rand.Rand
	keys          []string
	cover         map[algorithms.Algorithm]*mergeSeen
	packed        int
	// denials counts merged takes asking for their denials that answered
	// a denial; batched, merged calls take_batch decided; distinct, those
	// of them marked DISTINCT (no key twice).
	denials, batched, distinct int
}

// draw is one take's ops under lim: a request and its lease top-up, a wide
// batch past take.lua's pairwise distinct check, or a few ops on the
// first four keys.
func (r *mergeRig) draw(lim algorithms.Limit) []algorithms.Op {
	rng, keys := r.rng, r.keys
	switch x := rng.IntN(8); {
	case x < 3:
		// A request and the lease top-up riding on it: an op, then a
		// Spare op on the same key.
		key := keys[rng.IntN(4)]
		return []algorithms.Op{
			{Key: key, Limit: lim, Hits: 1},
			{Key: key, Limit: lim, Hits: 1 + rng.Uint64N(max(lim.Capacity(), 1)), Mode: algorithms.Spare},
		}
	case x < 4:
		// Wide: on distinct keys or repeating the first four.
		ops := make([]algorithms.Op, 9+rng.IntN(4))
		perm := rng.Perm(len(keys))
		for j := range ops {
			key := keys[perm[j]]
			if rng.IntN(2) == 0 {
				key = keys[rng.IntN(4)]
			}
			ops[j] = algorithms.Op{Key: key, Limit: lim, Hits: randomHits(rng, lim), Mode: algorithms.Mode(rng.IntN(6))}
		}
		return ops
	}
	ops := make([]algorithms.Op, 1+rng.IntN(3))
	for j := range ops {
		ops[j] = algorithms.Op{Key: keys[rng.IntN(4)], Limit: lim, Hits: randomHits(rng, lim), Mode: algorithms.Mode(rng.IntN(6)), Usage: rng.IntN(6) == 0}
	}
	return ops
}

// compare runs a group's takes merged and alone and requires the same
// replies and the same states of every key after.
func (r *mergeRig) compare(group int, takes [][]algorithms.Op, calls [][]any, asks []int) {
	ctx, t := context.Background(), r.t
	cmd := redis.NewCmd(ctx, scripts.MergeTakes(calls)...)
	_ = r.merged.Process(ctx, cmd)
	replies, errs := scripts.SplitTakes(cmd.Val(), cmd.Err(), len(takes))
	if _, ok := cmd.Val().(string); ok {
		r.batched++
		if args := cmd.Args(); args[len(args)-1] == "d" {
			r.distinct++
		}
	}
	for i, ops := range takes {
		one := redis.NewCmd(ctx, calls[i]...)
		_ = r.alone.Process(ctx, one)
		if errs[i] != nil || one.Err() != nil {
			t.Fatalf("group %d take %d: merged %v, alone %v", group, i, errs[i], one.Err())
		}
		parts, ok := one.Val().([]any)
		if !ok || len(parts) != 2 {
			t.Fatalf("group %d take %d: recording reply %v", group, i, one.Val())
		}
		// A merged take may get its values packed (take_fixed's reply_of):
		// the same values.
		if _, ok := replies[i].(string); ok {
			r.packed++
		}
		mergedVals, err1 := scripts.ReplyValues(replies[i])
		aloneVals, err2 := scripts.ReplyValues(parts[0])
		if err1 != nil || err2 != nil || !reflect.DeepEqual(mergedVals, aloneVals) {
			t.Fatalf("group %d take %d (asking %d) %+v:\n  merged %v (%v)\n  alone  %v (%v)", group, i, asks[i], ops, replies[i], err1, parts[0], err2)
		}
		if asks[i] != askNothing {
			r.noteCharges(group, i, ops, replies[i], asks[i] == askDenials)
		}
	}
	for _, key := range r.keys {
		var got [2]stored
		for i, rdb := range []*redis.Client{r.merged, r.alone} {
			pipe := rdb.Pipeline()
			read := queueRead(ctx, pipe, key)
			_, _ = pipe.Exec(ctx)
			got[i] = read.result()
		}
		if !reflect.DeepEqual(got[0], got[1]) {
			t.Fatalf("group %d key %s: merged left %+v, alone %+v", group, key, got[0], got[1])
		}
	}
}

// noteCharges counts a charged take's charges in cover.
func (r *mergeRig) noteCharges(group, i int, ops []algorithms.Op, reply any, denials bool) {
	out, err := scripts.Decode(reply, ops, true, denials)
	if err != nil {
		r.t.Fatalf("group %d take %d: %v", group, i, err)
	}
	if denials && slices.ContainsFunc(out.Decisions, func(d algorithms.Decision) bool { return !d.Allowed }) {
		r.denials++
	}
	ch, ds := out.Charges, out.Decisions
	if len(ch) > 0 {
		r.cover[ops[0].Limit.Algorithm].charged++
	}
	for _, c := range ch {
		for j, op := range ops {
			if op.Key == c.Key && op.Mode == algorithms.Spare && op.Hits > 0 && ds[j].Allowed {
				r.cover[ops[0].Limit.Algorithm].spare++
				break
			}
		}
	}
}

// TestMergedTakeFailsAlone: a take that fails inside a merged call gets
// its error and the takes around it their answers; ops whose lengths do not
// say which keys are whose fail the whole call before any take runs.

package scripts_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// TestMergedBatchAsAlone is TestMergedRepliesAsAlone for the calls
// take_batch decides in one pass (lua/take_many.lua): every take plain
// fixed_window ops on distinct keys, some asking for their charges, keys
// shared across takes (a later take sees an earlier one's write), denied
// takes between admitted ones, states corrupted, of another type or of an
// ended window; and calls it must leave to the takes one by one (a take
// of another algorithm, a repeated key or a Spare op in a take, denials
// asked). Replies and stored states must equal the takes run alone.
func TestMergedBatchAsAlone(t *testing.T) {
	ctx := context.Background()
	// draw's wide takes need 12 keys; plain takes share the first six.
	var keys []string
	for i := range 13 {
		keys = append(keys, "b:"+strconv.Itoa(i))
	}
	r := newMergeRig(t, keys)
	var lim algorithms.Limit
	now, declined := int64(1_700_000_000_000_000), 0
	for group := range 600 {
		now += r.rng.Int64N(2_000_000)
		// Some limits are not take_batch's: drawn often, so that the share
		// of calls batched varies little from seed to seed.
		if group%10 == 0 {
			lim = randomLimit(r.rng, algorithms.FixedWindow)
		}
		r.spoil(ctx)
		takes := make([][]algorithms.Op, 2+r.rng.IntN(12))
		// A third of the calls hold no key twice: MergeTakes marks them
		// DISTINCT, and take_batch keeps no record of its writes.
		var unique []int
		if group%3 == 0 {
			unique = r.rng.Perm(len(keys))
			takes = takes[:min(len(takes), 2+r.rng.IntN(3))] // at most 12 of the 13 keys
		}
		calls := make([][]any, len(takes))
		asks := make([]int, len(takes))
		odd := r.rng.IntN(6) == 0
		for i := range takes {
			if r.rng.IntN(4) == 0 {
				asks[i] = askCharges
			}
			takes[i] = r.drawPlain(lim)
			if unique != nil {
				takes[i], unique = r.drawFrom(lim, unique)
			}
			if odd && i == len(takes)/2 {
				// What take_batch declines: the whole call goes take by take.
				takes[i], asks[i] = r.draw(lim), r.rng.IntN(3)
				declined++
			}
			calls[i] = mergeableCallAsking(t, takes[i], now, asks[i])
		}
		r.compare(group, takes, calls, asks)
	}
	t.Logf("%d of 600 calls batched (%d on distinct keys), %d with a take it declines", r.batched, r.distinct, declined)
	if r.batched < 250 || r.distinct < 60 || declined < 50 {
		t.Errorf("%d calls batched, %d of them on distinct keys, %d declined: too few to judge", r.batched, r.distinct, declined)
	}
	if r.cover[algorithms.FixedWindow].charged < 100 {
		t.Errorf("%d charged takes charged: too few to judge", r.cover[algorithms.FixedWindow].charged)
	}
}

// drawPlain is a take take_batch decides: 1 to 3 plain ops (mode 0 or
// Enforce) on distinct keys of r.keys' first six.
func (r *mergeRig) drawPlain(lim algorithms.Limit) []algorithms.Op {
	rng := r.rng
	perm := rng.Perm(6)
	ops := make([]algorithms.Op, 1+rng.IntN(3))
	for j := range ops {
		ops[j] = algorithms.Op{Key: r.keys[perm[j]], Limit: lim, Hits: randomHits(rng, lim)}
		if rng.IntN(2) == 0 {
			ops[j].Mode = algorithms.Enforce
		}
	}
	return ops
}

// drawFrom is drawPlain's take on the first 1 to 3 of the keys whose
// indices are left (at least 3), and what it leaves.
func (r *mergeRig) drawFrom(lim algorithms.Limit, left []int) ([]algorithms.Op, []int) {
	ops := r.drawPlain(lim)
	for j := range ops {
		ops[j].Key = r.keys[left[j]]
	}
	return ops, left[len(ops):]
}

// spoil sometimes leaves a key, on both servers, in a state no take
// wrote: not a number, negative, past MaxCount, or of another type.
func (r *mergeRig) spoil(ctx context.Context) {
	if r.rng.IntN(5) != 0 {
		return
	}
	key := r.keys[r.rng.IntN(6)]
	values := []string{"garbage", "-5000", "0", strconv.FormatUint((algorithms.MaxCount+1)*1000, 10), "007"}
	v := r.rng.IntN(len(values) + 1)
	for _, rdb := range []*redis.Client{r.merged, r.alone} {
		var err error
		if v == len(values) {
			err = rdb.Del(ctx, key).Err()
			if err == nil {
				err = rdb.RPush(ctx, key, "x").Err()
			}
		} else {
			err = rdb.Set(ctx, key, values[v], 0).Err()
		}
		if err != nil {
			r.t.Fatal(err)
		}
	}
}

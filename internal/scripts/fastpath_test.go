package scripts_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// TestFixedWindowFastPath runs the take script and the same script without
// its fixed_window fast path (take_fixed) side by side on two mirrored
// key spaces: batches of 1 to 4 plain fixed_window enforce ops on distinct
// keys (the fast path's), some with one op of another kind or a repeated
// key (its fallbacks), with and without charges, over states that are
// absent, live, expired, corrupted or of another Redis type, and batches of
// Spare ops alone (lease refills) or with plain ops. An op may be
// followed by a lease top-up, a Spare op on its key under its limit (also
// the fast path's), some malformed (another limit, a second Spare op after
// it, another key: take_general's or take_distinct's). Every reply
// (decisions and charges), every stored value and every TTL must be the
// same: the fast path changes the cost, never the behaviour. Half the
// sequences call the fast side by FCALL, whose library keeps take_fixed's
// caches between calls.
func TestFixedWindowFastPath(t *testing.T) {
	r := newFastPathRig(t)
	// 25 x 200 batches explore every outcome several hundred times over;
	// RATELIMITD_SOAK runs twice as many.
	seqs, steps := testkit.Size(25, 50), 200
	for s := range seqs {
		keys := func(side string) []string {
			out := make([]string, 4)
			for i := range out {
				out[i] = fmt.Sprintf("fp:%s:%d:%d", side, s, i)
			}
			return out
		}
		fastKeys, slowKeys := keys("fast"), keys("slow")
		now := time.Now().UnixMicro()
		lims := []algorithms.Limit{r.limit(), r.limit(), r.limit(), r.limit()}
		for step := range steps {
			now += r.rng.Int64N(int64(lims[0].Period.Microseconds()) / 3)
			if r.rng.IntN(30) == 0 {
				r.corrupt(fastKeys, slowKeys, lims, now)
			}
			if r.rng.IntN(20) == 0 {
				lims[r.rng.IntN(4)] = r.limit()
			}
			ops := r.batch(lims)
			where := fmt.Sprintf("seq %d step %d, now %d, ops %+v", s, step, now, ops)
			r.compare(where, ops, now, s%2 == 0, fastKeys, slowKeys)
		}
	}
	t.Logf("%d batches (%d all plain fixed_window): %d ops allowed, %d denied; top-ups %d allowed, %d denied; other Spare ops %d allowed, %d denied",
		seqs*steps, r.fastRuns, r.allowed, r.denied, r.topups[1], r.topups[0], r.spares[1], r.spares[0])
	if r.allowed < 1000 || r.denied < 1000 || r.topups[0] < 300 || r.topups[1] < 300 || r.spares[0] < 300 || r.spares[1] < 300 {
		t.Errorf("the batches barely explore both outcomes: %d allowed, %d denied; top-ups %d allowed, %d denied; other Spare ops %d allowed, %d denied",
			r.allowed, r.denied, r.topups[1], r.topups[0], r.spares[1], r.spares[0])
	}
}

func TestFixedWindowFastPathTopUpPastMaxCount(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	slow, ok := scripts.SourceWithoutFastPath()
	if !ok {
		t.Fatal("SourceWithoutFastPath no longer finds the fast path's call")
	}
	op := func(r, h float64, mode algorithms.Mode) []byte {
		var buf []byte
		for _, v := range []float64{float64(algorithms.FixedWindow), r, 60e6, 0, 0, 0, h, float64(mode)} {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
		}
		return buf
	}
	const r = 2 * algorithms.MaxCount
	ops := string(append(op(r, algorithms.MaxCount+5, algorithms.Enforce), op(r, 1, algorithms.Spare)...))
	now := time.Now().UnixMicro()
	for _, charges := range []bool{false, true} {
		var replies [2]any
		var vals [2]string
		for i, src := range []string{scripts.Source(), slow} {
			key := fmt.Sprintf("fpmax:%t:%d", charges, i)
			args := []any{now, ops}
			if charges {
				args = append(args, 1)
			}
			v, err := rdb.Eval(ctx, src, []string{key, key}, args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			// The fast path packs its reply: compare the values.
			ints, err := scripts.ReplyValues(v)
			if err != nil {
				t.Fatal(err)
			}
			replies[i], vals[i] = ints, rdb.Get(ctx, key).Val()
		}
		if !reflect.DeepEqual(replies[0], replies[1]) || vals[0] != vals[1] {
			t.Errorf("charges %t: reply %v, stored %x; without the fast path %v, %x", charges, replies[0], vals[0], replies[1], vals[1])
		}
	}
}

// withinWindow reports whether v is a counter whose TTL pttl ends no later
// than the end of its window seen from its start: within the longest
// period the test draws.
func withinWindow(v string, pttl time.Duration) bool {
	return isCounter(v) && pttl <= 24*time.Hour+time.Second
}

// fastPathTakes is which batches take_fixed decides (and which of their ops
// are lease top-ups), as its comment states: every op a fixed_window
// Enforce (or mode 0) or Spare op without usage, on a valid limit; a Spare
// op on the key of the op before it is a top-up, which needs that op plain
// and under the same limit; and every key but a top-up's distinct.
func fastPathTakes(ops []algorithms.Op) (ok bool, topup []bool) {
	topup = make([]bool, len(ops))
	seen := map[string]bool{}
	ok = true
	for i, op := range ops {
		if op.Limit.Algorithm != algorithms.FixedWindow || op.Limit.Period <= 0 || op.Usage ||
			!(op.Mode == 0 || op.Mode == algorithms.Enforce || op.Mode == algorithms.Spare) {
			ok = false
		}
		if op.Mode == algorithms.Spare && i > 0 && ops[i-1].Key == op.Key {
			prev := ops[i-1]
			if prev.Mode == algorithms.Spare || prev.Limit != op.Limit {
				ok = false
			}
			topup[i] = true
			continue
		}
		if seen[op.Key] {
			ok = false
		}
		seen[op.Key] = true
	}
	return ok, topup
}

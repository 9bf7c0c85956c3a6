package scripts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// takeCall is the FCALL a Runner sends for ops: what the coalescer sees.
func takeCall(ops []algorithms.Op, now time.Time) ([]any, error) {
	keys, args, err := scripts.Encode(ops, now)
	if err != nil {
		return nil, err
	}
	out := []any{"fcall", scripts.TakeFunction(), len(keys)}
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, args...), nil
}

// fcallArgs is takeCall, failing t on an error.
func fcallArgs(t testing.TB, ops []algorithms.Op, now time.Time) []any {
	t.Helper()
	call, err := takeCall(ops, now)
	if err != nil {
		t.Fatal(err)
	}
	return call
}

// mergeableCall is ops' take FCALL at now (µs), asking for its charges
// when charged, which must be one MergeTakes takes.
func mergeableCall(t *testing.T, ops []algorithms.Op, now int64, charged bool) []any {
	t.Helper()
	if charged {
		return mergeableCallAsking(t, ops, now, askCharges)
	}
	return mergeableCallAsking(t, ops, now, askNothing)
}

// What a take asks for beyond its decisions: nothing, its charges
// (WithCharges) or its charges and denials (WithDenials).
const (
	askNothing = iota
	askCharges
	askDenials
)

// mergeableCallAsking is mergeableCall for a take asking for ask.
func mergeableCallAsking(t *testing.T, ops []algorithms.Op, now int64, ask int) []any {
	t.Helper()
	call := fcallArgs(t, ops, time.UnixMicro(now))
	switch ask {
	case askCharges:
		call = scripts.WithCharges(call)
	case askDenials:
		call = scripts.WithDenials(call)
	}
	if n, key, ok := scripts.Mergeable(call); !ok || n != now || key != ops[0].Key {
		t.Fatalf("a take's FCALL is not mergeable: %v", call)
	}
	return call
}

// TestMergedTakes: several takes merged into one call of the takes function
// answer each take as the Go model does when it runs them one after the
// other at the same instant, and leave the same state, for random takes of
// every algorithm and mode (Spare too), with shared and distinct keys; half
// of them ask for their charges, which are algorithms.Charges', and the
// others get their decisions alone.
func TestMergedTakes(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	// Keys written without their TTLs (RecordingLibrary): this test's clock
	// is not Redis's, and a TTL of a few µs would run out in real time.
	lib, _, ok := scripts.RecordingLibrary()
	if !ok {
		t.Fatal("RecordingLibrary no longer matches the library")
	}
	if err := rdb.FunctionLoadReplace(ctx, lib).Err(); err != nil {
		t.Fatal(err)
	}
	rng := newRand(t)
	m := model{}
	// Most takes use the first four keys; one in eight has 9-12 ops (past
	// the pairwise check of take.lua's distinct), on distinct keys or on
	// those four.
	keys := []string{"m:a", "m:b", "m:c", "m:d"}
	for i := range 12 {
		keys = append(keys, "m:wide"+strconv.Itoa(i))
	}
	lims := map[algorithms.Algorithm]algorithms.Limit{}
	for _, alg := range algorithms.All() {
		lims[alg] = randomLimit(rng, alg)
	}
	now := int64(1_700_000_000_000_000)
	merges, charges := 0, 0
	for group := range 300 {
		now += rng.Int64N(2_000_000)
		takes := make([][]algorithms.Op, 2+rng.IntN(7))
		calls := make([][]any, len(takes))
		charged := make([]bool, len(takes))
		for i := range takes {
			takes[i] = randomMergedTake(rng, keys, lims)
			charged[i] = rng.IntN(2) == 0
			calls[i] = mergeableCall(t, takes[i], now, charged[i])
		}
		cmd := redis.NewCmd(ctx, scripts.MergeTakes(calls)...)
		_ = rdb.Process(ctx, cmd)
		replies, errs := scripts.SplitTakes(cmd.Val(), cmd.Err(), len(takes))
		merges++
		for i, ops := range takes {
			if errs[i] != nil {
				t.Fatalf("group %d take %d: %v", group, i, errs[i])
			}
			charges += checkMergedTake(t, m, ops, replies[i], charged[i], now, fmt.Sprintf("group %d take %d", group, i))
		}
		for _, key := range keys {
			pipe := rdb.Pipeline()
			read := queueRead(ctx, pipe, key)
			// Exec reports the reads that do not fit the key's type;
			// result uses the one that does.
			_, _ = pipe.Exec(ctx)
			if err := sameState(m[key], read.result(), now); err != nil {
				t.Fatalf("group %d key %s: %v", group, key, err)
			}
		}
	}
	t.Logf("%d merged calls, %d charges replied", merges, charges)
	if charges < 100 {
		t.Errorf("only %d charges replied: the charged takes were barely admitted", charges)
	}
}

// randomMergedTake is one take of TestMergedTakes: 1-3 ops of one random
// algorithm on the first four keys, or one in eight 9-12 ops, on distinct
// keys or on those four; any mode, a quarter of them usage.
func randomMergedTake(rng *rand.Rand, keys []string, lims map[algorithms.Algorithm]algorithms.Limit) []algorithms.Op {
	alg := algorithms.All()[rng.IntN(len(algorithms.All()))]
	ops := make([]algorithms.Op, 1+rng.IntN(3))
	keyOf := func(int) string { return keys[rng.IntN(4)] }
	if rng.IntN(8) == 0 {
		ops = make([]algorithms.Op, 9+rng.IntN(4))
		if rng.IntN(2) == 0 {
			perm := rng.Perm(len(keys))
			keyOf = func(j int) string { return keys[perm[j]] }
		}
	}
	for j := range ops {
		ops[j] = algorithms.Op{Key: keyOf(j), Limit: lims[alg], Hits: randomHits(rng, lims[alg]), Mode: algorithms.Mode(rng.IntN(6)), Usage: rng.IntN(4) == 0}
	}
	return ops
}

// checkMergedTake requires one take's reply in a merged call to be the Go
// model's decisions and amounts applied for ops run at now after the takes
// before it, with its charges when charged asked for them, and five values
// per op when not. It returns how many charges the reply held.
func checkMergedTake(t *testing.T, m model, ops []algorithms.Op, reply any, charged bool, now int64, where string) int {
	t.Helper()
	got, err := scripts.Decode(reply, ops, charged, false)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	want := m.take(ops, time.UnixMicro(now))
	for j := range ops {
		if got.Decisions[j] != want.Decisions[j] || got.Applied[j] != want.Applied[j] {
			t.Fatalf("%s op %d %+v: merged %s applied %d, one after the other %s applied %d", where, j, ops[j], fmtDecision(got.Decisions[j]), got.Applied[j], fmtDecision(want.Decisions[j]), want.Applied[j])
		}
	}
	if !charged {
		if vals, err := scripts.ReplyValues(reply); err != nil || len(vals) != 5*len(ops) {
			t.Fatalf("%s without charges: %d values for %d ops (%v)", where, len(vals), len(ops), err)
		}
		return 0
	}
	if err := sameCharges(got.Charges, want.Charges); err != nil {
		t.Fatalf("%s: charges: %v\n  lua %+v\n  go  %+v", where, err, got.Charges, want.Charges)
	}
	return len(got.Charges)
}

func TestMergedTakeFailsAlone(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	lib, ok := scripts.FailingLibrary()
	if !ok {
		t.Fatal("FailingLibrary no longer finds take_keys")
	}
	if err := rdb.FunctionLoadReplace(ctx, lib).Err(); err != nil {
		t.Fatal(err)
	}
	// take_batch decides fixed_window's takes, take_keys the others'.
	t.Run("batch", func(t *testing.T) {
		checkMergedFailure(t, rdb, algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute})
	})
	t.Run("take by take", func(t *testing.T) {
		_ = rdb.FlushAll(ctx).Err()
		checkMergedFailure(t, rdb, algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Period: time.Minute})
	})
}

// checkMergedFailure runs takes of lim with a failing one between them,
// then a call with a malformed one, against FailingLibrary.
func checkMergedFailure(t *testing.T, rdb *redis.Client, lim algorithms.Limit) {
	ctx := context.Background()
	now := time.UnixMicro(1_700_000_000_000_000)
	good := fcallArgs(t, []algorithms.Op{{Key: "f:a", Limit: lim, Hits: 2}}, now)
	failing := fcallArgs(t, []algorithms.Op{{Key: "fail", Limit: lim, Hits: 2}, {Key: "f:b", Limit: lim, Hits: 2}}, now)
	cmd := redis.NewCmd(ctx, scripts.MergeTakes([][]any{good, failing, good})...)
	_ = rdb.Process(ctx, cmd)
	replies, errs := scripts.SplitTakes(cmd.Val(), cmd.Err(), 3)
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "injected failure") || errs[0] != nil || errs[2] != nil {
		t.Fatalf("errors %v, want the middle take's only", errs)
	}
	for i, wantRemaining := range map[int]uint64{0: 3, 2: 1} {
		d, err := takeDecisions(scripts.Decode(replies[i], []algorithms.Op{{Key: "f:a", Limit: lim, Hits: 2}}, false, false))
		if err != nil || !d[0].Allowed || d[0].Remaining != wantRemaining {
			t.Errorf("take %d: %v %v, want allowed with %d remaining", i, d, err, wantRemaining)
		}
	}
	if n := rdb.Exists(ctx, "fail", "f:b").Val(); n != 0 {
		t.Errorf("the failed take wrote %d keys", n)
	}

	bad := fcallArgs(t, []algorithms.Op{{Key: "f:c", Limit: lim, Hits: 1}}, now)
	bad[len(bad)-1] = "not 64 bytes"
	cmd = redis.NewCmd(ctx, scripts.MergeTakes([][]any{good, bad, good})...)
	_ = rdb.Process(ctx, cmd)
	if _, errs := scripts.SplitTakes(cmd.Val(), cmd.Err(), 3); errs[0] == nil || errs[1] == nil || errs[2] == nil {
		t.Fatalf("errors %v, want the whole call failed", errs)
	}
	if got := rdb.Get(ctx, "f:a").Val(); got == "" {
		t.Fatal("f:a vanished")
	}
	if d, err := takeDecisions(scripts.NewRunner().Take(ctx, rdb, []algorithms.Op{{Key: "f:a", Limit: lim}}, now)); err != nil || d[0].Remaining != 1 {
		t.Errorf("f:a after the failed call: %v %v, want 1 remaining as before it", d, err)
	}
}

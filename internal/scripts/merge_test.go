package scripts_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// fcallArgs is the FCALL a Runner sends for ops: what the coalescer sees.
func fcallArgs(t *testing.T, ops []algorithms.Op, now time.Time) []any {
	t.Helper()
	keys, args, err := scripts.Encode(ops, now)
	if err != nil {
		t.Fatal(err)
	}
	out := []any{"fcall", scripts.TakeFunction(), len(keys)}
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, args...)
}

// TestMergedTakes: several takes merged into one call of the takes function
// answer each take as the Go model does when it runs them one after the
// other at the same instant, and leave the same state, for random takes of
// every algorithm and mode, with shared and distinct keys.
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
	merges := 0
	for group := range 300 {
		now += rng.Int64N(2_000_000)
		takes := make([][]algorithms.Op, 2+rng.IntN(7))
		calls := make([][]any, len(takes))
		for i := range takes {
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
				ops[j] = algorithms.Op{Key: keyOf(j), Limit: lims[alg], Hits: randomHits(rng, lims[alg]), Mode: algorithms.Mode(rng.IntN(4)), Usage: rng.IntN(4) == 0}
			}
			takes[i], calls[i] = ops, fcallArgs(t, ops, time.UnixMicro(now))
			if n, key, ok := scripts.Mergeable(calls[i]); !ok || n != now || key != ops[0].Key {
				t.Fatalf("a take's FCALL is not mergeable: %v", calls[i])
			}
		}
		cmd := redis.NewCmd(ctx, scripts.MergeTakes(calls)...)
		_ = rdb.Process(ctx, cmd)
		replies, errs := scripts.SplitTakes(cmd.Val(), cmd.Err(), len(takes))
		merges++
		for i, ops := range takes {
			if errs[i] != nil {
				t.Fatalf("group %d take %d: %v", group, i, errs[i])
			}
			got, err := scripts.Decode(replies[i], len(ops))
			if err != nil {
				t.Fatalf("group %d take %d: %v", group, i, err)
			}
			want, _ := m.take(ops, time.UnixMicro(now))
			for j := range ops {
				if got[j] != want[j] {
					t.Fatalf("group %d take %d op %d %+v: merged %s, one after the other %s", group, i, j, ops[j], fmtDecision(got[j]), fmtDecision(want[j]))
				}
			}
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
	t.Logf("%d merged calls", merges)
}

// TestMergedTakeFailsAlone: a take that fails inside a merged call gets
// its error and the takes around it their answers; ops whose lengths do not
// say which keys are whose fail the whole call before any take runs.
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
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}
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
		d, err := scripts.Decode(replies[i], 1)
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
	if d, err := scripts.NewRunner().Take(ctx, rdb, []algorithms.Op{{Key: "f:a", Limit: lim}}, now); err != nil || d[0].Remaining != 1 {
		t.Errorf("f:a after the failed call: %v %v, want 1 remaining as before it", d, err)
	}
}

// TestMergeable: only a take's FCALL as Runner sends it merges, and its now
// and first key are read from where MergeTakes reads them.
func TestMergeable(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}
	now := time.UnixMicro(1_700_000_000_000_000)
	take := fcallArgs(t, []algorithms.Op{{Key: "k:a", Limit: lim, Hits: 1}, {Key: "k:b", Limit: lim}}, now)
	edit := func(f func(args []any) []any) []any { return f(append([]any(nil), take...)) }
	tests := map[string]struct {
		args     []any
		ok       bool
		now      int64
		firstKey string
	}{
		"take":           {take, true, now.UnixMicro(), "k:a"},
		"redis time":     {fcallArgs(t, []algorithms.Op{{Key: "k:c", Limit: lim}}, time.Time{}), true, 0, "k:c"},
		"with charges":   {scripts.WithCharges(edit(func(a []any) []any { return a })), false, 0, ""},
		"other function": {edit(func(a []any) []any { a[1] = "ratelimitd_undo"; return a }), false, 0, ""},
		"evalsha":        {edit(func(a []any) []any { a[0] = "evalsha"; return a }), false, 0, ""},
		"no keys":        {[]any{"fcall", scripts.TakeFunction(), 0, int64(0), ""}, false, 0, ""},
		"numkeys past":   {edit(func(a []any) []any { a[2] = 9; return a }), false, 0, ""},
		"numkeys text":   {edit(func(a []any) []any { a[2] = "2"; return a }), false, 0, ""},
		"ops short":      {edit(func(a []any) []any { a[len(a)-1] = "not 128 bytes"; return a }), false, 0, ""},
		"now not int64":  {edit(func(a []any) []any { a[len(a)-2] = "0"; return a }), false, 0, ""},
		"too short":      {[]any{"fcall", scripts.TakeFunction()}, false, 0, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			now, key, ok := scripts.Mergeable(tc.args)
			if ok != tc.ok || now != tc.now || key != tc.firstKey {
				t.Errorf("Mergeable = %d, %q, %v; want %d, %q, %v", now, key, ok, tc.now, tc.firstKey, tc.ok)
			}
		})
	}
}

func TestSplitTakes(t *testing.T) {
	down := errors.New("connection reset")
	for name, tc := range map[string]struct {
		reply any
		err   error
	}{
		"call failed":   {nil, down},
		"short reply":   {[]any{[]any{int64(1)}}, nil},
		"not an array":  {"OK", nil},
		"too many":      {[]any{[]any{}, []any{}, []any{}}, nil},
		"nested failed": {nil, fmt.Errorf("pipelined fcall: %w", context.DeadlineExceeded)},
	} {
		vals, errs := scripts.SplitTakes(tc.reply, tc.err, 2)
		for i := range errs {
			if errs[i] == nil || vals[i] != nil {
				t.Errorf("%s: take %d got %v, %v; want an error", name, i, vals[i], errs[i])
			}
		}
	}
}

package scripts_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
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

// mergeableCall is ops' take FCALL at now (µs), asking for its charges
// when charged, which must be one MergeTakes takes.
func mergeableCall(t *testing.T, ops []algorithms.Op, now int64, charged bool) []any {
	t.Helper()
	call := fcallArgs(t, ops, time.UnixMicro(now))
	if charged {
		call = scripts.WithCharges(call)
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

// TestMergedRepliesAsAlone: a merged call of takes with and without
// charges (a lease's top-ups among plain takes) gives each take exactly the
// reply that take's own FCALL gives on identical Redis state (its
// decisions, then its charges when it asked for them, value for value), and
// leaves identical state: one server runs each group merged, a second runs
// the same takes one FCALL after the other, for every algorithm, with keys
// repeated within and across takes and Spare ops riding on a key's other
// ops, as a top-up does.
func TestMergedRepliesAsAlone(t *testing.T) {
	ctx := context.Background()
	// Keys written without their TTLs (RecordingLibrary), as in
	// TestMergedTakes; the take function's reply is {reply, TTLs} there.
	lib, _, ok := scripts.RecordingLibrary()
	if !ok {
		t.Fatal("RecordingLibrary no longer matches the library")
	}
	r := &mergeRig{t: t, merged: newRedis(t), alone: newRedis(t), rng: newRand(t), cover: map[algorithms.Algorithm]*mergeSeen{}}
	for _, rdb := range []*redis.Client{r.merged, r.alone} {
		if err := rdb.FunctionLoadReplace(ctx, lib).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r.keys = []string{"r:a", "r:b", "r:c", "r:d"}
	for i := range 12 {
		r.keys = append(r.keys, "r:wide"+strconv.Itoa(i))
	}
	for _, alg := range algorithms.All() {
		r.cover[alg] = &mergeSeen{}
	}
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
		charged := make([]bool, len(takes))
		for i := range takes {
			alg := algorithms.All()[r.rng.IntN(len(algorithms.All()))]
			if group%2 == 1 && r.rng.IntN(5) != 0 {
				// Mostly fixed_window: several takes of its fast path on
				// the same keys in one call.
				alg = algorithms.FixedWindow
			}
			charged[i] = r.rng.IntN(2) == 0
			takes[i] = r.draw(lims[alg])
			calls[i] = mergeableCall(t, takes[i], now, charged[i])
		}
		r.compare(group, takes, calls, charged)
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
func (r *mergeRig) compare(group int, takes [][]algorithms.Op, calls [][]any, charged []bool) {
	ctx, t := context.Background(), r.t
	cmd := redis.NewCmd(ctx, scripts.MergeTakes(calls)...)
	_ = r.merged.Process(ctx, cmd)
	replies, errs := scripts.SplitTakes(cmd.Val(), cmd.Err(), len(takes))
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
			t.Fatalf("group %d take %d (charges %v) %+v:\n  merged %v (%v)\n  alone  %v (%v)", group, i, charged[i], ops, replies[i], err1, parts[0], err2)
		}
		if charged[i] {
			r.noteCharges(group, i, ops, replies[i])
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
func (r *mergeRig) noteCharges(group, i int, ops []algorithms.Op, reply any) {
	out, err := scripts.Decode(reply, ops, true, false)
	if err != nil {
		r.t.Fatalf("group %d take %d: %v", group, i, err)
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
		"take":       {take, true, now.UnixMicro(), "k:a"},
		"redis time": {fcallArgs(t, []algorithms.Op{{Key: "k:c", Limit: lim}}, time.Time{}), true, 0, "k:c"},
		// A lease top-up (TakeCharged) merges; a Cluster slot group
		// asking for its denials does not.
		"with charges":       {scripts.WithCharges(edit(func(a []any) []any { return a })), true, now.UnixMicro(), "k:a"},
		"with denials":       {scripts.WithDenials(edit(func(a []any) []any { return a })), false, 0, ""},
		"charges text":       {edit(func(a []any) []any { return append(a, "1") }), false, 0, ""},
		"charges other":      {edit(func(a []any) []any { return append(a, 3) }), false, 0, ""},
		"argv past":          {edit(func(a []any) []any { return append(scripts.WithCharges(a), 1) }), false, 0, ""},
		"other function":     {edit(func(a []any) []any { a[1] = "ratelimitd_undo"; return a }), false, 0, ""},
		"evalsha":            {edit(func(a []any) []any { a[0] = "evalsha"; return a }), false, 0, ""},
		"no keys":            {[]any{"fcall", scripts.TakeFunction(), 0, int64(0), ""}, false, 0, ""},
		"numkeys past":       {edit(func(a []any) []any { a[2] = 9; return a }), false, 0, ""},
		"numkeys text":       {edit(func(a []any) []any { a[2] = "2"; return a }), false, 0, ""},
		"ops short":          {edit(func(a []any) []any { a[len(a)-1] = "not 128 bytes"; return a }), false, 0, ""},
		"charged, ops short": {scripts.WithCharges(edit(func(a []any) []any { a[len(a)-1] = "not 128 bytes"; return a })), false, 0, ""},
		"now not int64":      {edit(func(a []any) []any { a[len(a)-2] = "0"; return a }), false, 0, ""},
		"too short":          {[]any{"fcall", scripts.TakeFunction()}, false, 0, ""},
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

// TestMergeTakesLayout: a merged call costs one argument per take (its
// ops) plus one per take that asks for charges (the marker after its ops),
// so merged takes that ask for none cost what they did before charged takes
// could merge; and the takes function refuses a marker other than a
// charged take's.
func TestMergeTakesLayout(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}
	now := time.UnixMicro(1_700_000_000_000_000)
	a := fcallArgs(t, []algorithms.Op{{Key: "l:a", Limit: lim, Hits: 1}, {Key: "l:b", Limit: lim}}, now)
	b := fcallArgs(t, []algorithms.Op{{Key: "l:c", Limit: lim, Hits: 1}}, now)
	c := scripts.WithCharges(fcallArgs(t, []algorithms.Op{{Key: "l:a", Limit: lim, Hits: 1}, {Key: "l:a", Limit: lim, Hits: 2, Mode: algorithms.Spare}}, now))
	plain := scripts.MergeTakes([][]any{a, b})
	if want := 3 + 3 + 1 + 2; len(plain) != want {
		t.Errorf("two takes without charges merge into %d args, want %d (fcall, function, numkeys, 3 KEYS, now, 2 ops)", len(plain), want)
	}
	mixed := scripts.MergeTakes([][]any{a, c, b})
	if want := 3 + 5 + 1 + 3 + 1; len(mixed) != want {
		t.Fatalf("three takes, one charged, merge into %d args, want %d", len(mixed), want)
	}
	// now, a's ops, c's ops and its marker, b's ops.
	argv := mixed[3+5:]
	if argv[0] != now.UnixMicro() || argv[1] != a[len(a)-1] || argv[2] != c[len(c)-2] || argv[3] != 1 || argv[4] != b[len(b)-1] {
		t.Errorf("merged ARGV %v", argv)
	}

	ctx := context.Background()
	rdb := newRedis(t)
	if err := rdb.FunctionLoadReplace(ctx, scripts.Library()).Err(); err != nil {
		t.Fatal(err)
	}
	cmd := redis.NewCmd(ctx, mixed...)
	_ = rdb.Process(ctx, cmd)
	replies, errs := scripts.SplitTakes(cmd.Val(), cmd.Err(), 3)
	for i, n := range []int{10, 10 + 7, 5} {
		if vals, err := scripts.ReplyValues(replies[i]); errs[i] != nil || err != nil || len(vals) != n {
			t.Errorf("take %d: %v %v %v, want %d values", i, replies[i], errs[i], err, n)
		}
	}
	// A denials marker (never merged) or any other value where a take's
	// ops or marker belong fails the call before any take runs.
	for _, marker := range []any{2, "x", ""} {
		bad := slices.Clone(mixed)
		bad[3+5+3] = marker
		cmd := redis.NewCmd(ctx, bad...)
		if err := rdb.Process(ctx, cmd); err == nil {
			t.Errorf("marker %q: the takes function answered %v, want an error", marker, cmd.Val())
		}
	}
	if got := rdb.Get(ctx, "l:c").Val(); !isCounter(got) {
		t.Fatalf("l:c holds %q after the first call", got)
	}
	d, err := takeDecisions(scripts.NewRunner().Take(ctx, rdb, []algorithms.Op{{Key: "l:a", Limit: lim}, {Key: "l:c", Limit: lim}}, now))
	if err != nil || d[0].Remaining != 1 || d[1].Remaining != 4 {
		t.Errorf("after the refused calls: %v %v, want l:a at 1 and l:c at 4 remaining as after the first", d, err)
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

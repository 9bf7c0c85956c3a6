package algorithms

import (
	"testing"
	"time"
)

// takeAllCase is one batch of TestTakeAll: the states stored before it,
// its ops, and the decisions and writes TakeAll must return at t0.
type takeAllCase struct {
	stored     map[string]State
	ops        []Op
	want       []Decision
	wantWrites map[string]State
}

// fwMinute is a fixed_window limit of n per minute; at t0 its window
// started 20 s ago and ends in 40 s.
func fwMinute(n uint64) Limit { return Limit{Algorithm: FixedWindow, Requests: n, Period: time.Minute} }

var tb10 = Limit{Algorithm: TokenBucket, Requests: 10, Period: time.Second}

// takeAllBasics: verdicts by mode, usage, repeated keys, stored states.
var takeAllBasics = map[string]takeAllCase{
	"all allowed writes every key with hits": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1}, {Key: "b", Limit: fwMinute(5), Hits: 2}, {Key: "c", Limit: fwMinute(5), Hits: 0}},
		want: []Decision{ok(1, 40*s), ok(3, 40*s), ok(5, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.state(t0.UnixMicro() + 40e6),
			"b": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6),
		},
	},
	"one denial consumes nothing and reports checks": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1}, {Key: "b", Limit: fwMinute(1), Hits: 2}, {Key: "c", Limit: fwMinute(3), Hits: 3}},
		want: []Decision{ok(2, 40*s), no(1, 40*s, Never), ok(3, 40*s)},
	},
	"a denied shadow op denies nothing and is counted past its limit": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1}, {Key: "b", Limit: fwMinute(1), Hits: 2, Mode: Shadow}},
		want: []Decision{ok(1, 40*s), recorded(1, 40*s, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.state(t0.UnixMicro() + 40e6),
			"b": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6),
		},
	},
	"an allowed shadow op is charged": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1, Mode: Shadow}},
		want: []Decision{ok(1, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.state(t0.UnixMicro() + 40e6),
		},
	},
	"an enforced denial writes no shadow op either": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 1, Mode: Shadow}, {Key: "b", Limit: fwMinute(1), Hits: 2}},
		want: []Decision{ok(2, 40*s), no(1, 40*s, Never)},
	},
	"one quota op with room carries the batch": {
		ops:  []Op{{Key: "q1", Limit: fwMinute(1), Hits: 2, Mode: Quota}, {Key: "q2", Limit: fwMinute(3), Hits: 2, Mode: Quota}, {Key: "e", Limit: fwMinute(5), Hits: 2}},
		want: []Decision{recorded(1, 40*s, 40*s), ok(1, 40*s), ok(3, 40*s)},
		wantWrites: map[string]State{
			"q1": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6),
			"q2": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6),
			"e":  Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6),
		},
	},
	"every quota op denied denies the batch": {
		ops:  []Op{{Key: "q1", Limit: fwMinute(1), Hits: 2, Mode: Quota}, {Key: "q2", Limit: fwMinute(1), Hits: 2, Mode: Quota}, {Key: "e", Limit: fwMinute(5), Hits: 2}},
		want: []Decision{no(1, 40*s, Never), no(1, 40*s, Never), ok(5, 40*s)},
	},
	"usage is recorded past the limit and denies": {
		ops:  []Op{{Key: "u", Limit: fwMinute(3), Hits: 5, Usage: true}, {Key: "t", Limit: fwMinute(10), Hits: 5, Usage: true}},
		want: []Decision{recorded(3, 40*s, 40*s), ok(5, 40*s)},
		wantWrites: map[string]State{
			"u": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.state(t0.UnixMicro() + 40e6),
			"t": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a denied batch records its usage only": {
		ops:  []Op{{Key: "a", Limit: fwMinute(3), Hits: 1}, {Key: "u", Limit: fwMinute(10), Hits: 4, Usage: true}, {Key: "d", Limit: fwMinute(1), Hits: 2}},
		want: []Decision{ok(3, 40*s), ok(6, 40*s), no(1, 40*s, Never)},
		wantWrites: map[string]State{
			"u": Window{Start: t0.UnixMicro() - 20e6, Count: 4}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a check after usage on one key sees the running total": {
		ops:  []Op{{Key: "a", Limit: fwMinute(10), Hits: 1699, Usage: true}, {Key: "a", Limit: fwMinute(10), Hits: 1}},
		want: []Decision{recorded(10, 40*s, 40*s), no(0, 40*s, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1699}.state(t0.UnixMicro() + 40e6),
		},
	},
	"usage over only with the request's admission stays denied with it": {
		ops:  []Op{{Key: "a", Limit: fwMinute(7), Hits: 2}, {Key: "a", Limit: fwMinute(7), Hits: 6, Usage: true}, {Key: "b", Limit: fwMinute(7), Hits: 2}},
		want: []Decision{ok(7, 40*s), recorded(5, 40*s, 40*s), ok(7, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 6}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a usage exactly at the limit is allowed": {
		ops:  []Op{{Key: "a", Limit: fwMinute(10), Hits: 10, Usage: true}, {Key: "a", Limit: fwMinute(10), Hits: 0}},
		want: []Decision{ok(0, 40*s), ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 10}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a repeated key is charged twice": {
		ops:  []Op{{Key: "a", Limit: fwMinute(3), Hits: 2}, {Key: "a", Limit: fwMinute(3), Hits: 1}},
		want: []Decision{ok(1, 40*s), ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 3}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a repeated key over the limit denies both": {
		ops:  []Op{{Key: "a", Limit: fwMinute(3), Hits: 2}, {Key: "a", Limit: fwMinute(3), Hits: 2}},
		want: []Decision{ok(3, 40*s), no(1, 40*s, 40*s)},
	},
	"stored state counts": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(3), Hits: 1}, {Key: "b", Limit: fwMinute(3), Hits: 1}},
		want:   []Decision{ok(0, 40*s), ok(2, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 3}.state(t0.UnixMicro() + 40e6),
			"b": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.state(t0.UnixMicro() + 40e6),
		},
	},
	"expired state reads as fresh": {
		stored: map[string]State{"a": Window{Start: 1, Count: 99}.state(t0.UnixMicro())},
		ops:    []Op{{Key: "a", Limit: fwMinute(3), Hits: 0}},
		want:   []Decision{ok(3, 40*s)},
	},
	"another family's state reads as fresh": {
		stored: map[string]State{"a": {Log: []LogEntry{{At: t0.UnixMicro(), Seq: 1, Hits: 5}}, ExpiresAt: t0.UnixMicro() + 1e6}},
		ops:    []Op{{Key: "a", Limit: tb10, Hits: 10}},
		want:   []Decision{ok(0, s)},
		wantWrites: map[string]State{
			"a": Bucket{Last: t0.UnixMicro(), Tokens: 0}.state(t0.UnixMicro() + 1e6),
		},
	},
	"an invalid limit denies the batch": {
		ops:  []Op{{Key: "a", Limit: fwMinute(3), Hits: 1}, {Key: "b", Limit: Limit{Algorithm: FixedWindow, Requests: 1}, Hits: 0}},
		want: []Decision{ok(3, 40*s), no(0, 0, Never)},
	},
}

func TestTakeAll(t *testing.T) {
	for _, table := range []map[string]takeAllCase{takeAllBasics, takeAllSpare, takeAllAtRest, takeAllRefunds} {
		for name, tc := range table {
			t.Run(name, func(t *testing.T) { checkTakeAll(t, tc) })
		}
	}
}

// checkTakeAll runs tc's batch at t0: its decisions, its writes, and one
// load per key.
func checkTakeAll(t *testing.T, tc takeAllCase) {
	loads := 0
	load := func(key string) State { loads++; return tc.stored[key] }
	b := TakeAll(tc.ops, load, t0)
	got, writes := b.Decisions, b.Writes
	for i := range tc.want {
		if got[i] != tc.want[i] {
			t.Errorf("op %d: got %s, want %s", i, fmtD(got[i]), fmtD(tc.want[i]))
		}
	}
	if len(writes) != len(tc.wantWrites) {
		t.Fatalf("writes %+v, want %+v", writes, tc.wantWrites)
	}
	for k, w := range tc.wantWrites {
		g, found := writes[k]
		if !found || g.regs != w.regs || g.ExpiresAt != w.ExpiresAt || len(g.Log) != len(w.Log) {
			t.Errorf("write %s = %+v, want %+v", k, g, w)
		}
	}
	keys := map[string]bool{}
	for _, op := range tc.ops {
		keys[op.Key] = true
	}
	if loads != len(keys) {
		t.Errorf("loaded %d times for %d keys", loads, len(keys))
	}
}

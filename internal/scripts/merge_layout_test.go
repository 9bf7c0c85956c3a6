package scripts_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

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
		// A lease top-up (TakeCharged) and a Cluster slot group asking
		// for its denials (TakeDenials) merge.
		"with charges":       {scripts.WithCharges(edit(func(a []any) []any { return a })), true, now.UnixMicro(), "k:a"},
		"with denials":       {scripts.WithDenials(edit(func(a []any) []any { return a })), true, now.UnixMicro(), "k:a"},
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
// ops), one per take that asks for charges (the marker after its ops), and
// one when no key repeats among its KEYS (the last); and the takes
// function refuses a marker other than a charged take's where a take's
// belongs.
func TestMergeTakesLayout(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}
	now := time.UnixMicro(1_700_000_000_000_000)
	a := fcallArgs(t, []algorithms.Op{{Key: "l:a", Limit: lim, Hits: 1}, {Key: "l:b", Limit: lim}}, now)
	b := fcallArgs(t, []algorithms.Op{{Key: "l:c", Limit: lim, Hits: 1}}, now)
	c := scripts.WithCharges(fcallArgs(t, []algorithms.Op{{Key: "l:a", Limit: lim, Hits: 1}, {Key: "l:a", Limit: lim, Hits: 2, Mode: algorithms.Spare}}, now))
	plain := scripts.MergeTakes([][]any{a, b})
	if want := 3 + 3 + 1 + 2 + 1; len(plain) != want || plain[want-1] != "d" {
		t.Errorf("two takes without charges on distinct keys merge into %v, want %d args (fcall, function, numkeys, 3 KEYS, now, 2 ops, \"d\")", plain, want)
	}
	mixed := scripts.MergeTakes([][]any{a, c, b})
	if want := 3 + 5 + 1 + 3 + 1; len(mixed) != want {
		t.Fatalf("three takes, one charged, merge into %d args, want %d", len(mixed), want)
	}
	// now, a's ops, c's ops and its marker, b's ops; no "d": l:a repeats.
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
	// A value that is neither a marker nor ops where a take's ops or
	// marker belong fails the call before any take runs.
	for _, marker := range []any{3, "x", "", "d"} {
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
		// take_batch's one string: per take its number of values, then them.
		"batch, one take":     {packed(1, 7), nil},
		"batch, short":        {packed(1, 7, 2), nil},
		"batch, past the end": {packed(1, 7, 3, 1, 2), nil},
		"batch, left over":    {packed(1, 7, 1, 8, 9), nil},
		"batch, negative":     {packed(1, 7, -1), nil},
		"batch, fraction":     {packed(1, 7, 0.5), nil},
		"batch, odd bytes":    {packed(1, 7, 0) + "x", nil},
	} {
		vals, errs := scripts.SplitTakes(tc.reply, tc.err, 2)
		for i := range errs {
			if errs[i] == nil || vals[i] != nil {
				t.Errorf("%s: take %d got %v, %v; want an error", name, i, vals[i], errs[i])
			}
		}
	}
}

// packed is values as take_batch packs them: little-endian binary64.
func packed(values ...float64) string {
	b := make([]byte, 0, 8*len(values))
	for _, v := range values {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return string(b)
}

func TestSplitTakesBatch(t *testing.T) {
	vals, errs := scripts.SplitTakes(packed(2, 7, 8, 0, 5, 5, 6, 7, 8, 9), nil, 3)
	want := []string{packed(7, 8), "", packed(5, 6, 7, 8, 9)}
	for i := range want {
		if errs[i] != nil || vals[i] != want[i] {
			t.Errorf("take %d: %q, %v; want %q", i, vals[i], errs[i], want[i])
		}
	}
}

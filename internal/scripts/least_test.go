package scripts_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// leastLibrary is testdata/least.lua on its layout: "strings" (as this
// library's counters) or "hash" (one hash per window), under a library
// and function names of its own.
func leastLibrary(layout string) (string, error) {
	b, err := os.ReadFile("testdata/least.lua")
	if err != nil {
		return "", err
	}
	code := string(b)
	if layout == "strings" {
		return code, nil
	}
	if layout != "hash" {
		return "", fmt.Errorf("no layout %q", layout)
	}
	for _, r := range [][2]string{
		{"name=ratelimitd_least\n", "name=ratelimitd_least_hash\n"},
		{"local LAYOUT = 'strings'", "local LAYOUT = 'hash'"},
		{"_1ea57'", "_1ea58'"},
	} {
		if !strings.Contains(code, r[0]) {
			return "", fmt.Errorf("testdata/least.lua has no %q", r[0])
		}
		code = strings.ReplaceAll(code, r[0], r[1])
	}
	return code, nil
}

// TestLeastLibraries holds leastLibrary's two layouts to this library's
// decisions on BenchmarkAgainstBaseline's kind of takes (plain fixed_window,
// no key twice in a take, keys repeating across the takes of a call, some
// denied), so that the benchmark weighs this library against ones doing the
// same work, not less.
func TestLeastLibraries(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	type library struct{ prefix, take, takes string }
	var libs []library
	for _, layout := range []string{"this", "strings", "hash"} {
		code := scripts.Library()
		if layout != "this" {
			var err error
			if code, err = leastLibrary(layout); err != nil {
				t.Fatal(err)
			}
		}
		if err := rdb.FunctionLoad(ctx, code).Err(); err != nil {
			t.Fatalf("%s: %v", layout, err)
		}
		take, takes := functionNames(code)
		if take == "" || takes == "" {
			t.Fatalf("%s registers no take or takes function", layout)
		}
		libs = append(libs, library{prefix: strconv.Itoa(len(libs)) + ":", take: take, takes: takes})
	}
	// A day's window: a run does not cross one.
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: 24 * time.Hour}
	rng := newRand(t)
	denied := 0
	for call := range 120 {
		takes := make([][]algorithms.Op, 1+rng.IntN(6))
		for i := range takes {
			takes[i] = make([]algorithms.Op, 1+rng.IntN(3))
			for d := range takes[i] {
				takes[i][d] = algorithms.Op{Key: fmt.Sprintf("{d%d}:%d", d, rng.IntN(6)), Limit: lim, Hits: uint64(1 + rng.IntN(2))}
			}
		}
		var want []algorithms.Decision
		for l, lib := range libs {
			got := leastCall(t, rdb, takes, lib.prefix, lib.take, lib.takes)
			if l == 0 {
				want = got
				continue
			}
			for i := range want {
				if got[i].Allowed != want[i].Allowed || got[i].Remaining != want[i].Remaining {
					t.Fatalf("call %d, %s op %d: %+v, this library %+v", call, lib.takes, i, got[i], want[i])
				}
			}
		}
		for _, d := range want {
			if !d.Allowed {
				denied++
			}
		}
	}
	if denied == 0 {
		t.Fatal("no op denied: the calls never reached the limit")
	}
}

// leastCall sends takes as one call (merged when more than one, its keys
// under prefix) to the take or takes function, and returns every op's
// decision in order.
func leastCall(t *testing.T, rdb *redis.Client, takes [][]algorithms.Op, prefix, take, merged string) []algorithms.Decision {
	t.Helper()
	ctx := context.Background()
	calls := make([][]any, len(takes))
	for i, ops := range takes {
		named := make([]algorithms.Op, len(ops))
		for d, op := range ops {
			op.Key = prefix + op.Key
			named[d] = op
		}
		calls[i] = fcallArgs(t, named, time.Time{})
		calls[i][1] = take
	}
	var replies []any
	if len(takes) == 1 {
		reply, err := rdb.Do(ctx, calls[0]...).Result()
		if err != nil {
			t.Fatal(err)
		}
		replies = []any{reply}
	} else {
		args := scripts.MergeTakes(calls)
		args[1] = merged
		cmd := redis.NewCmd(ctx, args...)
		_ = rdb.Process(ctx, cmd)
		var errs []error
		replies, errs = scripts.SplitTakes(cmd.Val(), cmd.Err(), len(takes))
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var out []algorithms.Decision
	for i, reply := range replies {
		o, err := scripts.Decode(reply, takes[i], false, false)
		if err != nil {
			t.Fatalf("%s: %v", merged, err)
		}
		out = append(out, o.Decisions...)
	}
	return out
}

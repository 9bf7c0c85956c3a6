package scripts_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/procstat"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// BenchmarkCallCost is where a round trip's Redis CPU goes, one call at a
// time from one connection (nothing pipelined, as a lightly loaded service
// sends): redis-server's CPU per call of PING (the event loop and the
// socket's system calls, which every call pays), an empty FCALL, one that
// reads TIME, envoyproxy/ratelimit's INCRBY + EXPIRE pipeline for one
// descriptor, and FCALLs of 1, 2, 4 and 11 one-op fixed_window takes
// (the take function alone, the takes function merged). What a merged call
// adds per take against what a call costs is what coalescing saves
// (docs/performance.md). The merged11/ lines send the same 11 takes to the
// functions of testdata/callcost.lua, each one part of take_many's work
// more than the one before (the call's arguments, TIME, the read, a write
// per counter): takes11 against write is what deciding and replying add.
// (BenchmarkAgainstBaseline with its "least" baseline weighs that closer.)
// CPU counts in 10 ms ticks: use -benchtime 20000x or more, and compare the
// lines of one run.
func BenchmarkCallCost(b *testing.B) {
	ctx := context.Background()
	rdb, pid := benchRedis(b, 1, scripts.Library())
	parts, err := os.ReadFile("testdata/callcost.lua")
	if err != nil {
		b.Fatal(err)
	}
	if err := rdb.FunctionLoadReplace(ctx, string(parts)).Err(); err != nil {
		b.Fatal(err)
	}
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1e9, Period: time.Minute}
	// takes is call i of k takes; prefix keeps each function's counters
	// apart from the others' values.
	takes := func(prefix string, i, k int) []any {
		calls := make([][]any, k)
		for j := range calls {
			ops := []algorithms.Op{{Key: prefix + strconv.Itoa((i*k+j)%mergedKeys), Limit: lim, Hits: 1}}
			calls[j] = fcallArgs(b, ops, time.Time{})
		}
		if k == 1 {
			return calls[0]
		}
		return scripts.MergeTakes(calls)
	}
	type costCase struct {
		name string
		call func(i int) error
	}
	cases := []costCase{
		{"ping", func(int) error { return rdb.Ping(ctx).Err() }},
		{"fcall-empty", func(int) error { return rdb.Do(ctx, "fcall", "callcost_empty", 0).Err() }},
		{"fcall-time", func(int) error { return rdb.Do(ctx, "fcall", "callcost_time", 0).Err() }},
		{"incrby+expire", func(i int) error {
			key := "cost:envoy:" + strconv.Itoa(i%mergedKeys)
			pipe := rdb.Pipeline()
			pipe.IncrBy(ctx, key, 1)
			pipe.Expire(ctx, key, time.Minute)
			_, err := pipe.Exec(ctx)
			return err
		}},
	}
	for _, k := range []int{1, 2, 4, mergedTakes} {
		cases = append(cases, costCase{"takes" + strconv.Itoa(k), func(i int) error { return rdb.Do(ctx, takes("cost:", i, k)...).Err() }})
	}
	for _, fn := range []string{"empty", "time", "read", "write"} {
		cases = append(cases, costCase{"merged11/" + fn, func(i int) error {
			call := takes("cost:"+fn+":", i, mergedTakes)
			call[1] = "callcost_" + fn
			return rdb.Do(ctx, call...).Err()
		}})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			before, err := procstat.CPUTime(pid)
			if err != nil {
				b.Fatal(err)
			}
			for i := range b.N {
				if err := c.call(i); err != nil {
					b.Fatal(err)
				}
			}
			after, err := procstat.CPUTime(pid)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((after-before).Microseconds())/float64(b.N), "redis-µs/call")
		})
	}
}

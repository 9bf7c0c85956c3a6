package scripts_test

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// BenchmarkRunnerTake is one take round trip to a local redis-server (Redis
// TIME clock) for one op and for a batch of 4 keys, as FCALL of the library
// and as EVALSHA of the script, side by side (run with -count to get A B A B
// pairs). redis-µs/call is Redis's own time per call (INFO commandstats
// usec_per_call of FCALL or EVALSHA); per extra op is (batch4 - op1) / 3.
//
// RATELIMITD_BASELINE_SCRIPT names a file holding another take script (say
// the one of an older commit, from `go test -run TestPrintSource`-like
// tooling or git show) to run as EVALSHA in the same pairs: "baseline".
func BenchmarkRunnerTake(b *testing.B) {
	ctx := context.Background()
	rdb := newRedis(b)
	type variant struct {
		name string
		take func(ops []algorithms.Op) error
		cmd  string
	}
	fcall, evalsha := scripts.NewRunner(), scripts.NewRunner(scripts.WithoutFunctions())
	variants := []variant{
		{"fcall", func(ops []algorithms.Op) error {
			_, err := takeDecisions(fcall.Take(ctx, rdb, ops, time.Time{}))
			return err
		}, "fcall"},
		{"evalsha", func(ops []algorithms.Op) error {
			_, err := takeDecisions(evalsha.Take(ctx, rdb, ops, time.Time{}))
			return err
		}, "evalsha"},
	}
	if path := os.Getenv("RATELIMITD_BASELINE_SCRIPT"); path != "" {
		src, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		base := redis.NewScript(string(src))
		variants = append(variants, variant{"baseline", func(ops []algorithms.Op) error {
			keys, args, err := scripts.Encode(ops, time.Time{})
			if err != nil {
				return err
			}
			return base.Run(ctx, rdb, keys, args...).Err()
		}, "evalsha"})
	}
	for _, alg := range algorithms.All() {
		for _, n := range []int{1, 4} {
			for _, v := range variants {
				name := alg.String() + "/op" + strconv.Itoa(n) + "/" + v.name
				b.Run(name, func(b *testing.B) {
					lim := algorithms.Limit{Algorithm: alg, Requests: 1e9, Period: time.Second}
					ops := make([]algorithms.Op, n)
					for i := range ops {
						ops[i] = algorithms.Op{Key: alg.String() + string(rune('a'+i)), Limit: lim, Hits: 1}
					}
					if err := v.take(ops); err != nil { // loads the script or library
						b.Fatal(err)
					}
					if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					for b.Loop() {
						if err := v.take(ops); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(redisMicrosPerCall(b, rdb, v.cmd), "redis-µs/call")
				})
			}
		}
	}
}

// BenchmarkTakeUnderLoad is redis-benchmark's view of a take, which it
// cannot send itself (the ops are binary): 20 clients calling at once, each
// take of 1 or 4 ops on keys drawn from 100,000 (so most are fresh, as
// under real traffic), by FCALL. take-µs/call is Redis's own time per call
// (INFO commandstats usec_per_call, wall time in Redis, so a busy machine
// inflates it); per extra op is (op4 - op1) / 3. Each client alternates
// with floorScript on other keys, whose floor-µs/call (EVALSHA, so
// commandstats keeps it apart) is what the same commands cost without
// logic. A sequential caller (BenchmarkRunnerTake) leaves Redis idle
// between calls, and cold.
func BenchmarkTakeUnderLoad(b *testing.B) {
	ctx := context.Background()
	srv := redistest.Start(b)
	const clients, keys = 20, 100_000
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: clients})
	b.Cleanup(func() { _ = rdb.Close() })
	r := scripts.NewRunner()
	for _, alg := range algorithms.All() {
		for _, n := range []int{1, 4} {
			b.Run(alg.String()+"/op"+strconv.Itoa(n), func(b *testing.B) {
				lim := algorithms.Limit{Algorithm: alg, Requests: 1e9, Period: time.Second}
				keysOf := func(rng *rand.Rand, prefix string) []string {
					ks := make([]string, n)
					for i := range ks {
						ks[i] = prefix + strconv.Itoa(i) + ":" + strconv.Itoa(rng.IntN(keys))
					}
					return ks
				}
				take := func(rng *rand.Rand) error {
					ops := make([]algorithms.Op, n)
					for i, k := range keysOf(rng, "load:") {
						ops[i] = algorithms.Op{Key: k, Limit: lim, Hits: 1}
					}
					if _, err := takeDecisions(r.Take(ctx, rdb, ops, time.Time{})); err != nil {
						return err
					}
					return floorScript.Run(ctx, rdb, keysOf(rng, "floor:")).Err()
				}
				if err := take(rand.New(rand.NewPCG(0, 0))); err != nil { // loads the library and the script
					b.Fatal(err)
				}
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(clients/runtime.GOMAXPROCS(0) + 1)
				var seed atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(seed.Add(1), 0))
					for pb.Next() {
						if err := take(rng); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(redisMicrosPerCall(b, rdb, "fcall"), "take-µs/call")
				b.ReportMetric(redisMicrosPerCall(b, rdb, "evalsha"), "floor-µs/call")
			})
		}
	}
}

// floorScript is FloorBody as a script.
var floorScript = redis.NewScript(scripts.FloorBody + "return 0")

// redisMicrosPerCall reads usec_per_call of cmd since the last CONFIG
// RESETSTAT.
func redisMicrosPerCall(b *testing.B, rdb *redis.Client, cmd string) float64 {
	stat, ok := redistest.CommandStats(b, rdb)[cmd]
	if !ok {
		b.Fatalf("no %s in INFO commandstats", cmd)
	}
	return stat.UsecPerCall()
}

// BenchmarkTakeInRedis times takes inside Redis (LoopLibrary): Redis's own
// time per take of 1 or 3 ops on fresh keys, and for fixed_window of a
// lease top-up (topup: one op and a Spare op on its key, with charges, as
// pkg/store/lease sends it), by Redis TIME, free of the
// network and of the client's scheduling. Each iteration runs the take
// (take-µs), the same commands without logic (floor-µs) and, if given,
// another commit's take (baseline-µs), one after the other: on a machine
// whose speed drifts between runs, only side by side figures compare. Use
// -benchtime 15x or more.
//
// For a baseline, run it at the old commit with
// RATELIMITD_WRITE_LOOP_LIBRARY=file, then at the new one with
// RATELIMITD_BASELINE_LOOP_LIBRARY=file.
func BenchmarkTakeInRedis(b *testing.B) {
	ctx := context.Background()
	rdb := newRedis(b)
	lib, variants := loopVariants(b, rdb)
	if err := rdb.FunctionLoadReplace(ctx, lib).Err(); err != nil {
		b.Fatal(err)
	}
	for _, alg := range algorithms.All() {
		for _, n := range []int{1, 3, 0} {
			ops, name, ok := loopOps(alg, n)
			if !ok {
				continue
			}
			keys, args, err := scripts.Encode(ops, time.Time{})
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				args = scripts.WithCharges(args)
			}
			args = append(args, loopIters)
			b.Run(alg.String()+name, func(b *testing.B) { benchLoop(b, rdb, variants, keys, args) })
		}
	}
}

// loopIters is how many takes one FCALL of a loop function runs.
const loopIters = 2000

// loopVariant is one loop function BenchmarkTakeInRedis times, and the
// metric it reports.
type loopVariant struct{ metric, fn string }

// loopVariants is this commit's loop library and its variants: the take,
// the floor and, given RATELIMITD_BASELINE_LOOP_LIBRARY, the baseline
// (loaded into rdb); RATELIMITD_WRITE_LOOP_LIBRARY writes this commit's.
func loopVariants(b *testing.B, rdb *redis.Client) (string, []loopVariant) {
	lib, loop, floor, ok := scripts.LoopLibrary()
	if !ok {
		b.Fatal("LoopLibrary no longer finds the take function")
	}
	if path := os.Getenv("RATELIMITD_WRITE_LOOP_LIBRARY"); path != "" {
		if err := os.WriteFile(path, []byte(loop+"\n"+lib), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	variants := []loopVariant{{"take-µs", loop}, {"floor-µs", floor}}
	path := os.Getenv("RATELIMITD_BASELINE_LOOP_LIBRARY")
	if path == "" {
		return lib, variants
	}
	text, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	fn, baseLib, ok := strings.Cut(string(text), "\n")
	if !ok {
		b.Fatalf("%s: want the loop function's name, a newline and the library", path)
	}
	if fn == loop {
		b.Fatalf("%s is this commit's library", path)
	}
	if err := rdb.FunctionLoadReplace(context.Background(), baseLib).Err(); err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	return lib, append(variants, loopVariant{"baseline-µs", fn})
}

// loopOps is the batch timed for alg: n ops on distinct keys ("/opN"), or
// for n 0 fixed_window's lease top-up (an op and a Spare op on its key,
// "/topup"); ok is false for a top-up of another algorithm.
func loopOps(alg algorithms.Algorithm, n int) (_ []algorithms.Op, name string, ok bool) {
	lim := algorithms.Limit{Algorithm: alg, Requests: 1e9, Period: time.Second}
	if n == 0 {
		if alg != algorithms.FixedWindow {
			return nil, "", false
		}
		op := algorithms.Op{Key: "loop:0:", Limit: lim, Hits: 1}
		ops := []algorithms.Op{op, op}
		ops[1].Hits, ops[1].Mode = 5, algorithms.Spare
		return ops, "/topup", true
	}
	ops := make([]algorithms.Op, n)
	for i := range ops {
		ops[i] = algorithms.Op{Key: "loop:" + strconv.Itoa(i) + ":", Limit: lim, Hits: 1}
	}
	return ops, "/op" + strconv.Itoa(n), true
}

// benchLoop times each variant's loop over keys and args in turn, from a
// flushed Redis each time.
func benchLoop(b *testing.B, rdb *redis.Client, variants []loopVariant, keys []string, args []any) {
	ctx := context.Background()
	take := func(v loopVariant) int64 {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		us, err := rdb.FCall(ctx, v.fn, keys, args...).Int64()
		if err != nil {
			b.Fatal(err)
		}
		return us
	}
	// One round untimed, so no variant pays for the change of algorithm
	// or batch size alone.
	for _, v := range variants {
		take(v)
	}
	us := make([]int64, len(variants))
	var loops int64
	for b.Loop() {
		// In turn first, so none always runs right after another.
		for j := range variants {
			i := (j + int(loops)) % len(variants)
			us[i] += take(variants[i])
		}
		loops++
	}
	for i, v := range variants {
		b.ReportMetric(float64(us[i])/float64(loops*loopIters), v.metric)
	}
}

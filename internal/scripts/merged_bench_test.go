package scripts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/procstat"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// BenchmarkMergedTakes is what issue 19 weighs a decision by: redis-server's
// CPU (user + system, from /proc, so Linux only) per decision of 1 or 3
// descriptors, each a fixed_window limit of 1000/s on one of 4096 keys (as
// cmd/rlbench's bench config), with 4 callers at once. "merged" sends them
// as the coalescer does under load, 11 takes to one FCALL of the takes
// function; "envoy-model" as envoyproxy/ratelimit does (cmd/rlbench's
// model), one pipeline of INCRBY + EXPIRE per descriptor per decision. The
// CPU counts in 10 ms ticks: use -benchtime 3s or more, and -count to get
// the A B A B pairs that only compare on a shared machine.
//
// BenchmarkAgainstBaseline compares this commit's library with another's.
func BenchmarkMergedTakes(b *testing.B) {
	ctx := context.Background()
	rdb, pid := benchRedis(b, 8, scripts.Library())
	mb := mergedBench{ctx: ctx, rdb: rdb, lim: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1000, Period: time.Second}}
	// decide makes mergedTakes decisions of n descriptors.
	decide := map[string]func(rng *rand.Rand, n int) error{
		"merged":      mb.merged,
		"envoy-model": mb.envoyModel,
	}
	targets := []string{"merged", "envoy-model"}
	for _, n := range []int{1, 3} {
		for _, target := range targets {
			b.Run(fmt.Sprintf("desc%d/%s", n, target), func(b *testing.B) {
				before, err := procstat.CPUTime(pid)
				if err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				for c := range mergedCallers {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(c), uint64(n)))
						for next.Add(1) <= int64(b.N) {
							if err := decide[target](rng, n); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				after, err := procstat.CPUTime(pid)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64((after-before).Microseconds())/float64(b.N*mergedTakes), "redis-µs/decision")
			})
		}
	}
}

// BenchmarkMergedTakes' shape: takes per FCALL (or pipelines per
// envoy-model round), keys per descriptor, concurrent callers.
const mergedTakes, mergedKeys, mergedCallers = 11, 4096, 4

// benchRedis is a private redis-server with the library code loaded, a
// client of pool connections to it (0: go-redis's default) and the
// server's process id, for the benchmarks that read its CPU time.
func benchRedis(b *testing.B, pool int, code string) (*redis.Client, int) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: pool})
	b.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.FunctionLoadReplace(context.Background(), code).Err(); err != nil {
		b.Fatal(err)
	}
	return rdb, redisPID(b, rdb)
}

// redisPID is the process id of rdb's redis-server; it skips b where its
// CPU time cannot be read.
func redisPID(b *testing.B, rdb *redis.Client) int {
	info, err := rdb.InfoMap(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	pid, err := strconv.Atoi(info["Server"]["process_id"])
	if err != nil {
		b.Fatalf("redis-server process_id: %v", err)
	}
	if _, err := procstat.CPUTime(pid); err != nil {
		b.Skipf("no CPU time of redis-server: %v", err)
	}
	return pid
}

// mergedBench makes BenchmarkMergedTakes' decisions on one Redis.
type mergedBench struct {
	ctx context.Context
	rdb *redis.Client
	lim algorithms.Limit
}

func (mb mergedBench) key(rng *rand.Rand, d int) string {
	return "bench:{d" + strconv.Itoa(d) + "}:" + strconv.Itoa(rng.IntN(mergedKeys))
}

// merged sends mergedTakes takes of n descriptors as one FCALL.
func (mb mergedBench) merged(rng *rand.Rand, n int) error {
	calls := make([][]any, mergedTakes)
	var ops []algorithms.Op
	for i := range calls {
		ops = make([]algorithms.Op, n)
		for d := range ops {
			ops[d] = algorithms.Op{Key: mb.key(rng, d), Limit: mb.lim, Hits: 1}
		}
		var err error
		if calls[i], err = takeCall(ops, time.Time{}); err != nil {
			return err
		}
	}
	cmd := redis.NewCmd(mb.ctx, scripts.MergeTakes(calls)...)
	_ = mb.rdb.Process(mb.ctx, cmd)
	replies, errs := scripts.SplitTakes(cmd.Val(), cmd.Err(), mergedTakes)
	for i := range replies {
		if errs[i] != nil {
			return errs[i]
		}
		if _, err := scripts.Decode(replies[i], ops, false, false); err != nil {
			return err
		}
	}
	return nil
}

// envoyModel makes mergedTakes decisions of n descriptors as envoyproxy
// does: a pipeline of INCRBY + EXPIRE per descriptor per decision.
func (mb mergedBench) envoyModel(rng *rand.Rand, n int) error {
	for range mergedTakes {
		window := "_" + strconv.FormatInt(time.Now().Unix(), 10)
		pipe := mb.rdb.Pipeline()
		for d := range n {
			k := mb.key(rng, d) + window
			pipe.IncrBy(mb.ctx, k, 1)
			pipe.Expire(mb.ctx, k, time.Second)
		}
		if _, err := pipe.Exec(mb.ctx); err != nil {
			return err
		}
	}
	return nil
}

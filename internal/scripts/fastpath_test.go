package scripts_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// TestFixedWindowFastPath runs the take script and the same script without
// its fixed_window fast path (take_fixed) side by side on two mirrored
// key spaces: batches of 1 to 4 plain fixed_window enforce ops on distinct
// keys (the fast path's), some with one op of another kind or a repeated
// key (its fallbacks), with and without charges, over states that are
// absent, live, expired, corrupted or of another Redis type. Every reply
// (decisions and charges), every stored value and every TTL must be the
// same: the fast path changes the cost, never the behaviour.
func TestFixedWindowFastPath(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	slow, ok := scripts.SourceWithoutFastPath()
	if !ok {
		t.Fatal("SourceWithoutFastPath no longer finds the fast path's call")
	}
	fastSHA, err1 := rdb.ScriptLoad(ctx, scripts.Source()).Result()
	slowSHA, err2 := rdb.ScriptLoad(ctx, slow).Result()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	rng := newRand(t)
	periods := []time.Duration{time.Minute, time.Hour, 24 * time.Hour}
	requests := []uint64{0, 1, 2, 3, 5, 10, 1000}
	limit := func() algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: requests[rng.IntN(len(requests))], Period: periods[rng.IntN(len(periods))]}
	}
	const seqs, steps = 50, 200
	fastRuns, allowed, denied := 0, 0, 0
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
		lims := []algorithms.Limit{limit(), limit(), limit(), limit()}
		for step := range steps {
			now += rng.Int64N(int64(lims[0].Period.Microseconds()) / 3)
			if rng.IntN(30) == 0 {
				// Corrupt or retype one key alike on both sides.
				k := rng.IntN(4)
				var v string
				switch rng.IntN(4) {
				case 0:
					v = scripts.PackRegisters(algorithms.FromRegisters(-5, 1<<60, 3, now+1e12))
				case 1:
					v = "not a state"
				case 2:
					v = string(make([]byte, 32)) // all zeros: a fresh state
				}
				for _, key := range []string{fastKeys[k], slowKeys[k]} {
					if v == "" {
						rdb.Del(ctx, key)
						rdb.RPush(ctx, key, "x")
					} else {
						rdb.Set(ctx, key, v, time.Hour)
					}
				}
			}
			if rng.IntN(20) == 0 {
				lims[rng.IntN(4)] = limit()
			}
			n := 1 + rng.IntN(4)
			perm := rng.Perm(4)
			ops := make([]algorithms.Op, n)
			plain := true
			for i := range ops {
				h := uint64(rng.IntN(4))
				if rng.IntN(20) == 0 {
					h = []uint64{math.MaxUint64, algorithms.MaxCount, 999}[rng.IntN(3)]
				}
				// Mode 0 and Enforce are both enforce.
				ops[i] = algorithms.Op{Key: fmt.Sprint(perm[i]), Limit: lims[perm[i]], Hits: h, Mode: algorithms.Mode(rng.IntN(2)), Joined: i > 0 && rng.IntN(3) == 0}
				if rng.IntN(12) == 0 {
					plain = false
					switch rng.IntN(5) {
					case 0:
						ops[i].Mode = []algorithms.Mode{algorithms.Shadow, algorithms.Quota, algorithms.Spare}[rng.IntN(3)]
					case 1:
						ops[i].Usage = true
					case 2:
						ops[i].Limit.Algorithm = algorithms.SlidingWindow
					case 3:
						ops[i].Limit.Period = 0 // invalid
					case 4:
						ops[i].Key = ops[0].Key // repeated: take_general
					}
				}
			}
			if plain {
				fastRuns++
			}
			charges := rng.IntN(2) == 0
			run := func(sha string, keys []string) (*redis.Cmd, []*redis.StringCmd, []*redis.DurationCmd) {
				mapped := make([]algorithms.Op, n)
				for i, op := range ops {
					mapped[i] = op
					var k int
					_, _ = fmt.Sscan(op.Key, &k)
					mapped[i].Key = keys[k]
				}
				ks, args, err := scripts.Encode(mapped, time.UnixMicro(now))
				if err != nil {
					t.Fatal(err)
				}
				if charges {
					args = scripts.WithCharges(args)
				}
				pipe := rdb.Pipeline()
				reply := pipe.EvalSha(ctx, sha, ks, args...)
				var gets []*redis.StringCmd
				var ttls []*redis.DurationCmd
				for _, k := range keys {
					gets = append(gets, pipe.Get(ctx, k))
					ttls = append(ttls, pipe.PTTL(ctx, k))
				}
				_, _ = pipe.Exec(ctx)
				return reply, gets, ttls
			}
			fr, fg, ft := run(fastSHA, fastKeys)
			sr, sg, st := run(slowSHA, slowKeys)
			where := fmt.Sprintf("seq %d step %d, now %d, charges %t, ops %+v", s, step, now, charges, ops)
			if fr.Err() != nil || sr.Err() != nil {
				t.Fatalf("%s: errors %v, %v", where, fr.Err(), sr.Err())
			}
			if !reflect.DeepEqual(fr.Val(), sr.Val()) {
				t.Fatalf("%s: reply %v, without the fast path %v", where, fr.Val(), sr.Val())
			}
			for i, v := range fr.Val().([]any)[:4*n] {
				if i%4 == 0 && v.(int64) == 1 {
					allowed++
				} else if i%4 == 0 {
					denied++
				}
			}
			for k := range fastKeys {
				if fg[k].Val() != sg[k].Val() || (fg[k].Err() == nil) != (sg[k].Err() == nil) {
					t.Fatalf("%s: key %d holds %q (%v), without the fast path %q (%v)", where, k, fg[k].Val(), fg[k].Err(), sg[k].Val(), sg[k].Err())
				}
				if d := ft[k].Val() - st[k].Val(); d < -time.Second || d > time.Second {
					t.Fatalf("%s: key %d PTTL %s, without the fast path %s", where, k, ft[k].Val(), st[k].Val())
				}
			}
		}
	}
	t.Logf("%d batches (%d all plain fixed_window): %d ops allowed, %d denied", seqs*steps, fastRuns, allowed, denied)
	if allowed < 1000 || denied < 1000 {
		t.Errorf("the batches barely explore both outcomes: %d allowed, %d denied", allowed, denied)
	}
}

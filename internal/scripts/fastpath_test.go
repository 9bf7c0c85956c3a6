package scripts_test

import (
	"context"
	"encoding/binary"
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
// absent, live, expired, corrupted or of another Redis type, and batches of
// Spare ops alone (lease refills) or with plain ops. An op may be
// followed by a lease top-up, a Spare op on its key under its limit (also
// the fast path's), some malformed (another limit, a second Spare op after
// it, another key: take_general's or take_distinct's). Every reply
// (decisions and charges), every stored value and every TTL must be the
// same: the fast path changes the cost, never the behaviour. Half the
// sequences call the fast side by FCALL, whose library keeps take_fixed's
// caches between calls.
func TestFixedWindowFastPath(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	slow, ok := scripts.SourceWithoutFastPath()
	if !ok {
		t.Fatal("SourceWithoutFastPath no longer finds the fast path's call")
	}
	// The fast side counts the takes its fast path declines: exactly those
	// not all plain.
	const fallbacks = "fp:fallbacks"
	fast, ok := scripts.SourceCountingFallbacks(fallbacks)
	if !ok {
		t.Fatal("SourceCountingFallbacks no longer finds the fallback")
	}
	fastSHA, err1 := rdb.ScriptLoad(ctx, fast).Result()
	slowSHA, err2 := rdb.ScriptLoad(ctx, slow).Result()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// Half the sequences run the fast side by FCALL, whose library keeps
	// take_fixed's caches from call to call.
	fastLib, ok := scripts.LibraryCountingFallbacks(fallbacks)
	if !ok {
		t.Fatal("LibraryCountingFallbacks no longer finds the fallback")
	}
	if err := rdb.FunctionLoadReplace(ctx, fastLib).Err(); err != nil {
		t.Fatal(err)
	}
	rng := newRand(t)
	periods := []time.Duration{time.Minute, time.Hour, 24 * time.Hour}
	requests := []uint64{0, 1, 2, 3, 5, 10, 1000}
	limit := func() algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: requests[rng.IntN(len(requests))], Period: periods[rng.IntN(len(periods))]}
	}
	const seqs, steps = 50, 200
	fastRuns, allowed, denied := 0, 0, 0
	topups := [2]int{} // Spare ops of top-ups in all plain batches: denied, allowed
	spares := [2]int{} // other Spare ops in all plain batches: denied, allowed
	fallbacksBefore := 0
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
				switch rng.IntN(6) {
				case 0:
					v = scripts.PackRegisters(algorithms.FromRegisters(-5, 1<<60, 3, now+1e12))
				case 1:
					v = []string{"not a state", "007", "-3", "12.0"}[rng.IntN(4)]
				case 2:
					v = string(make([]byte, 32)) // all zeros: a fresh state
				case 3, 4:
					// A counter of this window, the next or the one before,
					// in range or past MaxCount.
					p := lims[k].Period.Microseconds()
					start := now - now%p + p*int64(rng.IntN(3)-1)
					count := []int64{0, 3, algorithms.MaxCount, algorithms.MaxCount + 1}[rng.IntN(4)]
					v = scripts.PackCounter(algorithms.Window{Start: start, Count: count}.State(start + p))
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
			// Some batches are all Spare ops on distinct keys, as the lease
			// sweeper's refills; elsewhere a Spare op stands alone now and
			// then: the fast path's too, never denying its batch.
			refills := rng.IntN(8) == 0
			for i := range ops {
				h := uint64(rng.IntN(4))
				if rng.IntN(20) == 0 {
					h = []uint64{math.MaxUint64, algorithms.MaxCount, 999}[rng.IntN(3)]
				}
				// Mode 0 and Enforce are both enforce.
				ops[i] = algorithms.Op{Key: fmt.Sprint(perm[i]), Limit: lims[perm[i]], Hits: h, Mode: algorithms.Mode(rng.IntN(2)), Joined: i > 0 && rng.IntN(3) == 0}
				if refills || rng.IntN(12) == 0 {
					ops[i].Mode = algorithms.Spare
					if refills || rng.IntN(2) == 0 {
						continue
					}
				}
				if rng.IntN(12) == 0 {
					switch rng.IntN(5) {
					case 0:
						ops[i].Mode = []algorithms.Mode{algorithms.Shadow, algorithms.Quota}[rng.IntN(2)]
					case 1:
						ops[i].Usage = true
					case 2:
						ops[i].Limit.Algorithm = algorithms.SlidingWindow
					case 3:
						ops[i].Limit.Period = 0 // invalid
					case 4:
						if i > 0 {
							ops[i].Key = ops[0].Key // repeated: take_general
						} else {
							ops[i].Usage = true
						}
					}
				}
			}
			// Top-ups: a Spare op right after an op, on its key.
			var batch []algorithms.Op
			for _, op := range ops {
				batch = append(batch, op)
				if refills || rng.IntN(3) != 0 {
					continue
				}
				sp := algorithms.Op{Key: op.Key, Limit: op.Limit, Hits: uint64(rng.IntN(6)), Mode: algorithms.Spare, Joined: rng.IntN(4) == 0}
				if rng.IntN(20) == 0 {
					sp.Hits = []uint64{math.MaxUint64, algorithms.MaxCount, 999}[rng.IntN(3)]
				}
				batch = append(batch, sp)
				if rng.IntN(15) == 0 {
					switch rng.IntN(4) {
					case 0:
						batch[len(batch)-1].Limit.Requests++
					case 1:
						batch[len(batch)-1].Limit.Period *= 2
					case 2:
						batch = append(batch, sp)
					case 3:
						// Another key: a Spare op of its own, or a repeated key.
						var k int
						_, _ = fmt.Sscan(op.Key, &k)
						batch[len(batch)-1].Key = fmt.Sprint((k + 1 + rng.IntN(3)) % 4)
					}
				}
			}
			ops, n = batch, len(batch)
			plain, isTopup := fastPathTakes(ops)
			if plain {
				fastRuns++
			}
			charges := rng.IntN(2) == 0
			// keys' last entry, if not a state key, is read after the take.
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
				var reply *redis.Cmd
				if sha == fastSHA && s%2 == 0 {
					reply = pipe.FCall(ctx, scripts.TakeFunction(), ks, args...)
				} else {
					reply = pipe.EvalSha(ctx, sha, ks, args...)
				}
				var gets []*redis.StringCmd
				var ttls []*redis.DurationCmd
				for _, k := range keys {
					gets = append(gets, pipe.Get(ctx, k))
					ttls = append(ttls, pipe.PTTL(ctx, k))
				}
				_, _ = pipe.Exec(ctx)
				return reply, gets, ttls
			}
			fr, fg, ft := run(fastSHA, append(fastKeys[:4:4], fallbacks))
			sr, sg, st := run(slowSHA, slowKeys)
			after, _ := fg[4].Int()
			fell := after > fallbacksBefore
			fallbacksBefore = after
			where := fmt.Sprintf("seq %d step %d, now %d, charges %t, ops %+v", s, step, now, charges, ops)
			if fr.Err() != nil || sr.Err() != nil {
				t.Fatalf("%s: errors %v, %v", where, fr.Err(), sr.Err())
			}
			if fell == plain {
				t.Fatalf("%s: all plain %t, but the fast path declined %t", where, plain, fell)
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
				if i%4 == 0 && plain && isTopup[i/4] {
					topups[v.(int64)]++
				}
				if i%4 == 0 && plain && !isTopup[i/4] && ops[i/4].Mode == algorithms.Spare {
					spares[v.(int64)]++
				}
			}
			for k := range fastKeys {
				if gone := fg[k].Err() != sg[k].Err(); gone && max(ft[k].Val(), st[k].Val()) < time.Second {
					// One side read a key of a TTL under a second before it
					// expired, the other after: both read it as it stood.
					continue
				}
				if fg[k].Val() != sg[k].Val() || (fg[k].Err() == nil) != (sg[k].Err() == nil) {
					t.Fatalf("%s: key %d holds %q (%v), without the fast path %q (%v)", where, k, fg[k].Val(), fg[k].Err(), sg[k].Val(), sg[k].Err())
				}
				// A write in the window its key's state is already in keeps
				// the TTL an earlier write of that window set for the same
				// end (counter_put's INCRBY): under Redis's clock the
				// two agree within the ms ttl_ms rounds up, but this test's
				// clock runs ahead of Redis's, so a kept TTL is longer by
				// the test time since that write, never shorter, and never
				// past the window's end seen from its start.
				if d := ft[k].Val() - st[k].Val(); d < -time.Second || (d > time.Second && !withinWindow(fg[k].Val(), ft[k].Val())) {
					t.Fatalf("%s: key %d PTTL %s, without the fast path %s", where, k, ft[k].Val(), st[k].Val())
				}
			}
		}
	}
	t.Logf("%d batches (%d all plain fixed_window): %d ops allowed, %d denied; top-ups %d allowed, %d denied; other Spare ops %d allowed, %d denied",
		seqs*steps, fastRuns, allowed, denied, topups[1], topups[0], spares[1], spares[0])
	if allowed < 1000 || denied < 1000 || topups[0] < 300 || topups[1] < 300 || spares[0] < 300 || spares[1] < 300 {
		t.Errorf("the batches barely explore both outcomes: %d allowed, %d denied; top-ups %d allowed, %d denied; other Spare ops %d allowed, %d denied",
			allowed, denied, topups[1], topups[0], spares[1], spares[0])
	}
}

// TestFixedWindowFastPathTopUpPastMaxCount hand-packs what Encode never
// sends (Validate bounds Requests by MaxCount): an op whose count ends past
// MaxCount, then its top-up, which reads that state as out of range, as
// take_general does. Both paths must still agree.
func TestFixedWindowFastPathTopUpPastMaxCount(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	slow, ok := scripts.SourceWithoutFastPath()
	if !ok {
		t.Fatal("SourceWithoutFastPath no longer finds the fast path's call")
	}
	op := func(r, h float64, mode algorithms.Mode) []byte {
		var buf []byte
		for _, v := range []float64{float64(algorithms.FixedWindow), r, 60e6, 0, 0, 0, h, float64(mode)} {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
		}
		return buf
	}
	const r = 2 * algorithms.MaxCount
	ops := string(append(op(r, algorithms.MaxCount+5, algorithms.Enforce), op(r, 1, algorithms.Spare)...))
	now := time.Now().UnixMicro()
	for _, charges := range []bool{false, true} {
		var replies [2]any
		var vals [2]string
		for i, src := range []string{scripts.Source(), slow} {
			key := fmt.Sprintf("fpmax:%t:%d", charges, i)
			args := []any{now, ops}
			if charges {
				args = append(args, 1)
			}
			v, err := rdb.Eval(ctx, src, []string{key, key}, args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			replies[i], vals[i] = v, rdb.Get(ctx, key).Val()
		}
		if !reflect.DeepEqual(replies[0], replies[1]) || vals[0] != vals[1] {
			t.Errorf("charges %t: reply %v, stored %x; without the fast path %v, %x", charges, replies[0], vals[0], replies[1], vals[1])
		}
	}
}

// withinWindow reports whether v is a counter whose TTL pttl ends no later
// than the end of its window seen from its start: within the longest
// period the test draws.
func withinWindow(v string, pttl time.Duration) bool {
	return isCounter(v) && pttl <= 24*time.Hour+time.Second
}

// fastPathTakes is which batches take_fixed decides (and which of their ops
// are lease top-ups), as its comment states: every op a fixed_window
// Enforce (or mode 0) or Spare op without usage, on a valid limit; a Spare
// op on the key of the op before it is a top-up, which needs that op plain
// and under the same limit; and every key but a top-up's distinct.
func fastPathTakes(ops []algorithms.Op) (ok bool, topup []bool) {
	topup = make([]bool, len(ops))
	seen := map[string]bool{}
	ok = true
	for i, op := range ops {
		if op.Limit.Algorithm != algorithms.FixedWindow || op.Limit.Period <= 0 || op.Usage ||
			!(op.Mode == 0 || op.Mode == algorithms.Enforce || op.Mode == algorithms.Spare) {
			ok = false
		}
		if op.Mode == algorithms.Spare && i > 0 && ops[i-1].Key == op.Key {
			prev := ops[i-1]
			if prev.Mode == algorithms.Spare || prev.Limit != op.Limit {
				ok = false
			}
			topup[i] = true
			continue
		}
		if seen[op.Key] {
			ok = false
		}
		seen[op.Key] = true
	}
	return ok, topup
}

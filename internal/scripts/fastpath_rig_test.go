package scripts_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// fastPathRig runs the take script with its fast path (fastSHA, or the
// library by FCALL) and without it (slowSHA) side by side, and counts
// what the batches explored.
type fastPathRig struct {
	t                         *testing.T
	rdb                       *redis.Client
	rng                       *rand.Rand
	fastSHA, slowSHA          string
	fastRuns, allowed, denied int
	topups, spares            [2]int // Spare ops in all plain batches, top-ups or not: denied, allowed
	fellBefore                int
}

// fastPathFallbacks is the key the fast side counts the takes its fast path
// declines in: exactly those not all plain.
const fastPathFallbacks = "fp:fallbacks"

func newFastPathRig(t *testing.T) *fastPathRig {
	ctx := context.Background()
	r := &fastPathRig{t: t, rdb: newRedis(t), rng: newRand(t)}
	slow, ok := scripts.SourceWithoutFastPath()
	if !ok {
		t.Fatal("SourceWithoutFastPath no longer finds the fast path's call")
	}
	fast, ok := scripts.SourceCountingFallbacks(fastPathFallbacks)
	if !ok {
		t.Fatal("SourceCountingFallbacks no longer finds the fallback")
	}
	var err1, err2 error
	r.fastSHA, err1 = r.rdb.ScriptLoad(ctx, fast).Result()
	r.slowSHA, err2 = r.rdb.ScriptLoad(ctx, slow).Result()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// Half the sequences run the fast side by FCALL, whose library keeps
	// take_fixed's caches from call to call.
	fastLib, ok := scripts.LibraryCountingFallbacks(fastPathFallbacks)
	if !ok {
		t.Fatal("LibraryCountingFallbacks no longer finds the fallback")
	}
	if err := r.rdb.FunctionLoadReplace(ctx, fastLib).Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *fastPathRig) limit() algorithms.Limit {
	periods := []time.Duration{time.Minute, time.Hour, 24 * time.Hour}
	requests := []uint64{0, 1, 2, 3, 5, 10, 1000}
	return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: requests[r.rng.IntN(len(requests))], Period: periods[r.rng.IntN(len(periods))]}
}

// corrupt overwrites or retypes one key alike on both sides.
func (r *fastPathRig) corrupt(fastKeys, slowKeys []string, lims []algorithms.Limit, now int64) {
	ctx := context.Background()
	k := r.rng.IntN(4)
	var v string
	switch r.rng.IntN(6) {
	case 0:
		v = scripts.PackRegisters(scripts.FromRegisters(0, -5, 1<<60, 3, now+1e12))
	case 1:
		v = []string{"not a state", "007", "-3", "12.0"}[r.rng.IntN(4)]
	case 2:
		v = string(make([]byte, 32)) // all zeros: a fresh state
	case 3, 4:
		// A counter of this window, the next or the one before, in range
		// or past MaxCount.
		p := lims[k].Period.Microseconds()
		start := now - now%p + p*int64(r.rng.IntN(3)-1)
		count := []int64{0, 3, algorithms.MaxCount, algorithms.MaxCount + 1}[r.rng.IntN(4)]
		v = scripts.PackCounter(algorithms.StateOf(0, algorithms.Window{Start: start, Count: count}, start+p))
	}
	for _, key := range []string{fastKeys[k], slowKeys[k]} {
		if v == "" {
			r.rdb.Del(ctx, key)
			r.rdb.RPush(ctx, key, "x")
		} else {
			r.rdb.Set(ctx, key, v, time.Hour)
		}
	}
}

// batch draws the ops of one take on keys "0".."3" under lims: 1-4 plain
// fixed_window ops, now and then of another kind or a repeated key, some
// all Spare (lease refills), and top-ups after ops (a Spare op on its key
// under its limit), some malformed.
func (r *fastPathRig) batch(lims []algorithms.Limit) []algorithms.Op {
	rng := r.rng
	n := 1 + rng.IntN(4)
	perm := rng.Perm(4)
	ops := make([]algorithms.Op, n)
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
			r.spoil(&ops[i], i, ops[0].Key)
		}
	}
	var batch []algorithms.Op
	for _, op := range ops {
		batch = append(batch, op)
		if !refills && rng.IntN(3) == 0 {
			batch = r.topUp(batch, op)
		}
	}
	return batch
}

// spoil makes op i something take_fixed does not decide.
func (r *fastPathRig) spoil(op *algorithms.Op, i int, first string) {
	switch r.rng.IntN(5) {
	case 0:
		op.Mode = []algorithms.Mode{algorithms.Shadow, algorithms.Quota, algorithms.NegativeHits}[r.rng.IntN(3)]
	case 1:
		op.Usage = true
	case 2:
		op.Limit.Algorithm = algorithms.SlidingWindow
	case 3:
		op.Limit.Period = 0 // invalid
	case 4:
		if i > 0 {
			op.Key = first // repeated: take_general
		} else {
			op.Usage = true
		}
	}
}

// topUp appends a Spare op on op's key under its limit, now and then
// malformed: another limit or key, or a second one.
func (r *fastPathRig) topUp(batch []algorithms.Op, op algorithms.Op) []algorithms.Op {
	rng := r.rng
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
	return batch
}

// run takes ops on keys (op keys "0".."3" name keys[0..3]) by sha, or by
// the library's FCALL, then reads every key of keys and its PTTL.
func (r *fastPathRig) run(sha string, fcall bool, keys []string, ops []algorithms.Op, now int64, charges bool) (*redis.Cmd, []*redis.StringCmd, []*redis.DurationCmd) {
	ctx := context.Background()
	mapped := make([]algorithms.Op, len(ops))
	for i, op := range ops {
		mapped[i] = op
		var k int
		_, _ = fmt.Sscan(op.Key, &k)
		mapped[i].Key = keys[k]
	}
	ks, args, err := scripts.Encode(mapped, time.UnixMicro(now))
	if err != nil {
		r.t.Fatal(err)
	}
	if charges {
		args = scripts.WithCharges(args)
	}
	pipe := r.rdb.Pipeline()
	var reply *redis.Cmd
	if fcall {
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

// compare runs ops on both sides and requires the same reply, values and
// TTLs, and that the fast path declined exactly the batches not all plain.
func (r *fastPathRig) compare(where string, ops []algorithms.Op, now int64, fcall bool, fastKeys, slowKeys []string) {
	t := r.t
	plain, isTopup := fastPathTakes(ops)
	if plain {
		r.fastRuns++
	}
	charges := r.rng.IntN(2) == 0
	where += fmt.Sprintf(", charges %t", charges)
	// The fast side's keys' last entry, not a state key, is read after the
	// take: the fallbacks counter.
	fr, fg, ft := r.run(r.fastSHA, fcall, append(fastKeys[:4:4], fastPathFallbacks), ops, now, charges)
	sr, sg, st := r.run(r.slowSHA, false, slowKeys, ops, now, charges)
	after, _ := fg[4].Int()
	fell := after > r.fellBefore
	r.fellBefore = after
	if fr.Err() != nil || sr.Err() != nil {
		t.Fatalf("%s: errors %v, %v", where, fr.Err(), sr.Err())
	}
	if fell == plain {
		t.Fatalf("%s: all plain %t, but the fast path declined %t", where, plain, fell)
	}
	// The fast path packs its reply (take_fixed's reply_of): the same values.
	fv, ferr := scripts.ReplyValues(fr.Val())
	sv, serr := scripts.ReplyValues(sr.Val())
	if ferr != nil || serr != nil || !reflect.DeepEqual(fv, sv) {
		t.Fatalf("%s: reply %v (%v), without the fast path %v (%v)", where, fv, ferr, sv, serr)
	}
	r.count(fv[:5*len(ops)], ops, plain, isTopup)
	for k := range fastKeys {
		if gone := fg[k].Err() != sg[k].Err(); gone && max(ft[k].Val(), st[k].Val()) < time.Second {
			// One side read a key of a TTL under a second before it
			// expired, the other after: both read it as it stood.
			continue
		}
		if fg[k].Val() != sg[k].Val() || (fg[k].Err() == nil) != (sg[k].Err() == nil) {
			t.Fatalf("%s: key %d holds %q (%v), without the fast path %q (%v)", where, k, fg[k].Val(), fg[k].Err(), sg[k].Val(), sg[k].Err())
		}
		// A write in the window its key's state is already in keeps the
		// TTL an earlier write of that window set for the same end
		// (counter_put's INCRBY): under Redis's clock the two agree within
		// the ms ttl_ms rounds up, but this test's clock runs ahead of
		// Redis's, so a kept TTL is longer by the test time since that
		// write, never shorter, and never past the window's end seen from
		// its start.
		if d := ft[k].Val() - st[k].Val(); d < -time.Second || (d > time.Second && !withinWindow(fg[k].Val(), ft[k].Val())) {
			t.Fatalf("%s: key %d PTTL %s, without the fast path %s", where, k, ft[k].Val(), st[k].Val())
		}
	}
}

// count adds a batch's decisions to what the run explored.
func (r *fastPathRig) count(decisions []int64, ops []algorithms.Op, plain bool, isTopup []bool) {
	for i := 0; i < len(decisions); i += 5 {
		allowed := decisions[i]
		if allowed == 1 {
			r.allowed++
		} else {
			r.denied++
		}
		switch {
		case plain && isTopup[i/5]:
			r.topups[allowed]++
		case plain && ops[i/5].Mode == algorithms.Spare:
			r.spares[allowed]++
		}
	}
}

// TestFixedWindowFastPathTopUpPastMaxCount hand-packs what Encode never
// sends (Validate bounds Requests by MaxCount): an op whose count ends past
// MaxCount, then its top-up, which reads that state as out of range, as
// take_general does. Both paths must still agree.

package scripts_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// The differential test: for every algorithm, sequences of random ops (time
// steps from 0 to beyond the period and a few backwards, hits from 0 to far
// beyond the capacity, limit changes, multi-op batches with repeated keys and
// mixed algorithms, and states corrupted out of every algorithm's range) must
// give the same decisions and leave the same state in Lua on a real
// redis-server as algorithms.TakeAll does in Go, and no TTL may exceed twice
// the horizon of the rules that wrote it.
const (
	diffSequences = 100
	diffSteps     = 100 // diffSequences*diffSteps = 10^4 steps per algorithm
)

var periods = []time.Duration{
	time.Microsecond, 7 * time.Microsecond, time.Millisecond, 1234567 * time.Microsecond,
	time.Second, time.Minute, time.Hour, 24 * time.Hour, 365 * 24 * time.Hour,
}

var requestChoices = []uint64{1, 1, 2, 3, 5, 10, 10, 100, 1000, 1e9}

// randomLimit draws a valid limit of alg (retrying until Validate passes).
func randomLimit(rng *rand.Rand, alg algorithms.Algorithm) algorithms.Limit {
	for {
		lim := algorithms.Limit{
			Algorithm: alg,
			Requests:  requestChoices[rng.IntN(len(requestChoices))],
			Period:    periods[rng.IntN(len(periods))],
		}
		if rng.IntN(50) == 0 {
			lim.Requests = 0
		}
		if alg.Bucket() && rng.IntN(2) == 0 {
			lim.Burst = 1 + rng.Uint64N(3*max(lim.Requests, 1))
		}
		if alg.Stepped() {
			if rng.IntN(2) == 0 {
				lim.RefillInterval = time.Duration(1+rng.Int64N(lim.Period.Microseconds())) * time.Microsecond
			}
			if rng.IntN(2) == 0 {
				lim.MaxDebt = rng.Uint64N(2*lim.Capacity() + 2)
			}
		}
		if alg.Calendar() && rng.IntN(4) == 0 {
			// Calendar months (USE_CALENDAR_MONTH_RATE_LIMIT), 1 to 3 or 12.
			lim.Calendar = true
			lim.Period = algorithms.Month * time.Duration([]int{1, 1, 2, 3, 12}[rng.IntN(5)])
		}
		if lim.Validate() == nil {
			return lim
		}
	}
}

// mutate changes one parameter of lim, as a config reload would.
func mutate(rng *rand.Rand, lim algorithms.Limit) algorithms.Limit {
	for {
		next := lim
		switch rng.IntN(6) {
		case 0:
			next.Requests = requestChoices[rng.IntN(len(requestChoices))]
		case 1:
			if next.Algorithm.Bucket() {
				next.Burst = rng.Uint64N(3*max(next.Requests, 1) + 1)
			}
		case 2:
			next.Period = periods[rng.IntN(len(periods))]
		case 3:
			if next.Algorithm.Stepped() {
				next.MaxDebt = rng.Uint64N(2*next.Capacity() + 2)
			}
		case 4:
			if next.Algorithm.Stepped() {
				next.RefillInterval = time.Duration(rng.Int64N(next.Period.Microseconds()+1)) * time.Microsecond
			}
		case 5:
			return randomLimit(rng, lim.Algorithm)
		}
		if next.Validate() == nil {
			return next
		}
	}
}

func randomHits(rng *rand.Rand, lim algorithms.Limit) uint64 {
	capacity := max(lim.Capacity()+lim.MaxDebt, 1)
	switch r := rng.IntN(100); {
	case r < 10:
		return 0
	case r < 45:
		return 1
	case r < 75:
		return 1 + rng.Uint64N(min(capacity, 20))
	case r < 85:
		return capacity - 1 + rng.Uint64N(3)
	case r < 95:
		return rng.Uint64N(2*capacity + 2)
	default:
		return []uint64{math.MaxUint64, algorithms.MaxCount, algorithms.MaxCount + 1, 1 << 42, 1 << 53}[rng.IntN(5)]
	}
}

func randomStep(rng *rand.Rand, p time.Duration, now int64) int64 {
	us := p.Microseconds()
	if now > 4_000_000_000_000_000 {
		us = 1000
	}
	switch r := rng.IntN(100); {
	case r < 3:
		// The clock went back (a Redis failover to a replica behind it).
		return -rng.Int64N(2*us + 1)
	case r < 20:
		return 0
	case r < 40:
		return rng.Int64N(us/10 + 1)
	case r < 80:
		return rng.Int64N(us + 1)
	default:
		return rng.Int64N(3*us + 1)
	}
}

// sequence is one independent history on its own keys and clock.
type sequence struct {
	keys [4]string
	now  int64
	lim  algorithms.Limit
	// counterPeriod is the period of every op of the Counter family on the
	// sequence's keys: a counter's key names its period (internal/config's
	// KeyBuilder), and its value only a tag of its window (lua/counter.lua),
	// which tells the windows of one period apart, not of two.
	counterPeriod time.Duration
	// counterMonths, when above 0, makes the sequence's counters count in
	// calendar months (USE_CALENDAR_MONTH_RATE_LIMIT; a key names that too).
	counterMonths int64
	history       []string
}

// pin gives lim the sequence's counter period if it is a Counter's (and
// valid: an invalid period stays invalid).
func (s *sequence) pin(lim algorithms.Limit) algorithms.Limit {
	if lim.Algorithm.Family() == algorithms.Counter && lim.Period != 0 {
		lim.Period, lim.Calendar = s.counterPeriod, s.counterMonths > 0
		if lim.Calendar {
			lim.Period = time.Duration(s.counterMonths) * algorithms.Month
		}
	}
	return lim
}

func (s *sequence) note(format string, args ...any) {
	s.history = append(s.history, fmt.Sprintf(format, args...))
	if len(s.history) > 12 {
		s.history = s.history[1:]
	}
}

// nextOps draws the ops of one step: mostly one op on the main key; some
// batches of 2-4 ops, half of them over the first two keys (so keys repeat:
// the script's general path), half on distinct keys (its distinct-keys
// path), with limit variants and, rarely, another algorithm; every mode
// (0 = Enforce .. NegativeHits, a refund) is drawn alike.
func (s *sequence) nextOps(rng *rand.Rand) []algorithms.Op {
	if rng.IntN(10) == 0 {
		s.lim = s.pin(mutate(rng, s.lim))
	}
	if rng.IntN(8) != 0 {
		// One in four is a usage report, recorded past the limit; one in
		// six a lease top-up on its own (Spare: taken only if it fits);
		// one in six a refund.
		op := algorithms.Op{Key: s.keys[0], Limit: s.lim, Hits: randomHits(rng, s.lim), Usage: rng.IntN(4) == 0}
		switch rng.IntN(6) {
		case 0:
			op.Mode = algorithms.Spare
		case 1:
			op.Mode = algorithms.NegativeHits
		}
		return []algorithms.Op{op}
	}
	ops := make([]algorithms.Op, 2+rng.IntN(3))
	distinct := rng.Perm(len(s.keys))
	if rng.IntN(2) == 0 {
		distinct = nil
	}
	for i := range ops {
		lim := s.lim
		switch rng.IntN(10) {
		case 0:
			lim = randomLimit(rng, algorithms.All()[rng.IntN(len(algorithms.All()))])
		case 1, 2:
			lim = mutate(rng, lim)
		case 3:
			lim.Period = 0 // invalid: denied with RetryAfter never
		}
		key := s.keys[rng.IntN(2)]
		if distinct != nil {
			key = s.keys[distinct[i]]
		}
		lim = s.pin(lim)
		ops[i] = algorithms.Op{Key: key, Limit: lim, Hits: randomHits(rng, lim), Mode: algorithms.Mode(rng.IntN(6)), Usage: rng.IntN(4) == 0, Joined: rng.IntN(2) == 0}
	}
	return ops
}

func TestDifferential(t *testing.T) {
	rdb := newRedis(t)
	src, ok := scripts.RecordingSource()
	if !ok {
		t.Fatal("RecordingSource no longer matches the script's PEXPIRE or return")
	}
	hash, err := rdb.ScriptLoad(context.Background(), src).Result()
	if err != nil {
		t.Fatal(err)
	}
	queue := func(ctx context.Context, pipe redis.Pipeliner, keys []string, args []any) *redis.Cmd {
		return pipe.EvalSha(ctx, hash, keys, args...)
	}
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			differential(t, rdb, queue, alg)
		})
	}
}

// TestDifferentialFunction is TestDifferential through the FUNCTION library
// and FCALL, the production path on Redis 7.
func TestDifferentialFunction(t *testing.T) {
	rdb := newRedis(t)
	lib, fn, ok := scripts.RecordingLibrary()
	if !ok {
		t.Fatal("RecordingLibrary no longer matches the library's PEXPIRE or take call")
	}
	if err := rdb.FunctionLoad(context.Background(), lib).Err(); err != nil {
		t.Fatal(err)
	}
	queue := func(ctx context.Context, pipe redis.Pipeliner, keys []string, args []any) *redis.Cmd {
		return pipe.FCall(ctx, fn, keys, args...)
	}
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			differential(t, rdb, queue, alg)
		})
	}
}

// queueFunc queues one recording take in a pipeline.
type queueFunc func(ctx context.Context, pipe redis.Pipeliner, keys []string, args []any) *redis.Cmd

// diffRun is one algorithm's differential run: the Go model, the
// sequences, and what the run has seen.
type diffRun struct {
	t       *testing.T
	rdb     *redis.Client
	queue   queueFunc
	rng     *rand.Rand
	goState model
	seqs    []*sequence
	// ttlFor is the ExpiresAt each key's TTL was last set for: a write that
	// keeps a key's TTL (a counter's INCRBY, in the window its state is in)
	// must store that same ExpiresAt, so the TTL still ends it, within the
	// ms ttl_ms rounds up. A corrupted key's is whatever its writer set.
	ttlFor map[string]int64
	// deadline is when, on the sequences' clock, Redis drops each key: its
	// recorded TTL's end. Real TTLs run on Redis's clock, not the test's,
	// so the recording scripts set none and the test drops a key, in Redis
	// and in the model (as memstore's sweep does), once its TTL has passed.
	// A counter's value only tags its window (lua/counter.lua): it relies on
	// its key not outliving that window.
	deadline map[string]int64
	// months is each key's sequence's counterMonths.
	months                map[string]int64
	allowed, denied, kept int
}

// diffPending is one sequence's take of a step, queued with its reads.
type diffPending struct {
	ops     []algorithms.Op
	eval    *redis.Cmd
	reads   [4]*stateRead
	charges bool // the take replies its charges (scripts.WithCharges)
	denials bool // and its denials (scripts.WithDenials)
}

func differential(t *testing.T, rdb *redis.Client, queue queueFunc, alg algorithms.Algorithm) {
	r := &diffRun{t: t, rdb: rdb, queue: queue, rng: newRand(t), goState: model{}, ttlFor: map[string]int64{}, deadline: map[string]int64{}, months: map[string]int64{}}
	r.seqs = make([]*sequence, diffSequences)
	for i := range r.seqs {
		s := &sequence{
			keys: [4]string{fmt.Sprintf("diff:%s:%d:a", alg, i), fmt.Sprintf("diff:%s:%d:b", alg, i),
				fmt.Sprintf("diff:%s:%d:c", alg, i), fmt.Sprintf("diff:%s:%d:d", alg, i)},
			now:           1_700_000_000_000_000 + r.rng.Int64N(1e12),
			counterPeriod: periods[r.rng.IntN(len(periods))],
		}
		if r.rng.IntN(4) == 0 {
			s.counterMonths = []int64{1, 1, 2, 3, 12}[r.rng.IntN(5)]
		}
		for _, key := range s.keys {
			r.months[key] = s.counterMonths
		}
		s.lim = s.pin(randomLimit(r.rng, alg))
		r.seqs[i] = s
	}
	for step := range diffSteps {
		steps := r.queueStep()
		for i, s := range r.seqs {
			r.judge(step, i, s, steps[i])
		}
	}
	t.Logf("%d steps: %d ops allowed, %d denied; %d writes kept their key's TTL", diffSequences*diffSteps, r.allowed, r.denied, r.kept)
	if alg.Family() == algorithms.Counter && r.kept < diffSteps {
		t.Errorf("only %d writes kept their key's TTL: the test barely judges them", r.kept)
	}
	if r.allowed < diffSteps || r.denied < diffSteps {
		t.Errorf("the random ops barely explore both outcomes: %d allowed, %d denied", r.allowed, r.denied)
	}
}

// queueStep moves every sequence's clock, draws its ops (and now and then
// corrupts its main key), and runs their takes and the reads after them in
// one pipeline.
func (r *diffRun) queueStep() []diffPending {
	ctx := context.Background()
	pipe := r.rdb.Pipeline()
	steps := make([]diffPending, len(r.seqs))
	for i, s := range r.seqs {
		s.now += randomStep(r.rng, s.lim.Period, s.now)
		for _, key := range s.keys {
			if d := r.deadline[key]; d != 0 && s.now >= d {
				pipe.Del(ctx, key)
				delete(r.goState, key)
				delete(r.deadline, key)
			}
		}
		ops := s.nextOps(r.rng)
		if r.rng.IntN(40) == 0 {
			key := s.keys[0]
			s.note("corrupted %s: %s", key, corrupt(ctx, pipe, r.goState, key, s.now, s.counterPeriod, s.counterMonths > 0, r.rng))
			r.ttlFor[key] = r.goState[key].ExpiresAt
			delete(r.deadline, key)
			if st := r.goState[key]; st.Family() == algorithms.Counter {
				// A counter as a take leaves it: until its window ends.
				r.deadline[key] = st.ExpiresAt
			}
		}
		keys, args, err := scripts.Encode(ops, time.UnixMicro(s.now))
		if err != nil {
			r.t.Fatal(err)
		}
		// Half the takes reply their charges, which also keeps a
		// single op off the script's write-at-once path.
		// Half of those its denials too, as a Cluster slot group's.
		switch r.rng.IntN(4) {
		case 0:
			args = scripts.WithCharges(args)
			steps[i].charges = true
		case 1:
			args = scripts.WithDenials(args)
			steps[i].charges, steps[i].denials = true, true
		}
		steps[i].ops = ops
		steps[i].eval = r.queue(ctx, pipe, keys, args)
		for k, key := range s.keys {
			steps[i].reads[k] = queueRead(ctx, pipe, key)
		}
	}
	_, _ = pipe.Exec(ctx) // WRONGTYPE replies of the reads are expected
	return steps
}

// judge holds sequence i's take of a step to the Go model: decisions,
// denials, charges, stored states and TTLs.
func (r *diffRun) judge(step, i int, s *sequence, p diffPending) {
	t := r.t
	reply, err := p.eval.Result()
	if err != nil {
		t.Fatalf("step %d seq %d: evalsha: %v", step, i, err)
	}
	parts, ok := reply.([]any)
	if !ok || len(parts) != 2 {
		t.Fatalf("step %d seq %d: reply %v", step, i, reply)
	}
	out, err := scripts.Decode(parts[0], p.ops, p.charges, p.denials)
	if err != nil {
		t.Fatalf("step %d seq %d: %v", step, i, err)
	}
	got := out.Decisions
	pttl := map[string]int64{}
	for j, v := range parts[1].([]any) {
		pttl[p.ops[j].Key] = v.(int64)
	}
	before := make(map[string]algorithms.State, len(s.keys))
	for _, key := range s.keys {
		st := r.goState[key]
		st.Log = slices.Clone(st.Log)
		before[key] = st
	}
	wb := r.goState.take(p.ops, time.UnixMicro(s.now))
	want, writes := wb.Decisions, wb.Writes
	var b strings.Builder
	for j, op := range p.ops {
		fmt.Fprintf(&b, "\n  op %d %s %+v hits=%d mode=%d usage=%t joined=%t go=%s/%d lua=%s/%d", j, op.Key, op.Limit, op.Hits, op.Mode, op.Usage, op.Joined, fmtDecision(want[j]), wb.Applied[j], fmtDecision(got[j]), out.Applied[j])
	}
	s.note("t=%d%s", s.now, b.String())
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d seq %d: %s\nhistory (newest last):\n%s", step, i, fmt.Sprintf(format, args...), strings.Join(s.history, "\n"))
	}
	for j := range p.ops {
		if got[j] != want[j] || out.Applied[j] != wb.Applied[j] {
			fail("op %d: lua %s applied %d, go %s applied %d", j, fmtDecision(got[j]), out.Applied[j], fmtDecision(want[j]), wb.Applied[j])
		}
		if want[j].Allowed {
			r.allowed++
		} else {
			r.denied++
		}
	}
	if p.charges {
		if err := judgeCharges(p, out, wb, before, s.now); err != nil {
			fail("%v", err)
		}
	}
	for k, key := range s.keys {
		if err := r.judgeKey(key, p.reads[k].result(), writes, pttl[key], p.ops, s.now); err != nil {
			fail("%v", err)
		}
	}
}

// judgeCharges compares the charges (and denials) the take replied with
// the Go batch's (and TakeAll's for the batch denied).
func judgeCharges(p diffPending, out scripts.Outcome, want algorithms.Batch, before map[string]algorithms.State, now int64) error {
	if p.denials {
		// The ops' decisions in a denied batch: TakeAll's with one more
		// op, on a key of its own, that denies it.
		deny := algorithms.Op{Key: "diff:deny", Hits: 1} // an invalid limit
		den := algorithms.TakeAll(append(slices.Clone(p.ops), deny), func(key string) algorithms.State {
			st := before[key]
			st.Log = slices.Clone(st.Log)
			return st
		}, time.UnixMicro(now))
		for j := range out.Denials {
			if out.Denials[j] != den.Decisions[j] || out.DeniedApplied[j] != den.Applied[j] {
				return fmt.Errorf("op %d denial: lua %s applied %d, go %s applied %d", j, fmtDecision(out.Denials[j]), out.DeniedApplied[j], fmtDecision(den.Decisions[j]), den.Applied[j])
			}
		}
	}
	if err := sameCharges(out.Charges, want.Charges); err != nil {
		return fmt.Errorf("charges: %w\n  lua %+v\n  go  %+v", err, out.Charges, want.Charges)
	}
	return nil
}

// judgeKey compares what Redis holds at key after a take with the Go
// model, and the TTL the take gave it.
func (r *diffRun) judgeKey(key string, st stored, writes map[string]algorithms.State, pttl int64, ops []algorithms.Op, now int64) error {
	if err := sameStateMonths(r.goState[key], st, now, r.months[key]); err != nil {
		return fmt.Errorf("key %s: %w", key, err)
	}
	if st.kind == "counter" {
		st.st = r.goState[key] // the same, sameState says: the window a value only tags
	}
	_, written := writes[key]
	switch {
	case written && pttl > 0:
		r.deadline[key] = now + pttl*1000
	case written && pttl == 0:
		delete(r.deadline, key) // deleted: a state that no longer matters
	}
	switch {
	case written && !live(st.st, now):
		// Deleted (sameState checked Redis holds nothing), maybe after an
		// earlier write of the same take (a refund's) recorded its TTL.
	case written && pttl == scripts.KeptTTL:
		r.kept++
		if st.st.ExpiresAt != r.ttlFor[key] {
			return fmt.Errorf("key %s kept the TTL set for ExpiresAt %d, holds %d", key, r.ttlFor[key], st.st.ExpiresAt)
		}
	case written:
		r.ttlFor[key] = st.st.ExpiresAt
		if err := checkTTL(key, pttl, st, now); err != nil {
			return err
		}
		if bound := ttlBound(ops, key); pttl*1000 > bound {
			return fmt.Errorf("key %s TTL %dms is beyond twice its rules' horizon %dµs", key, pttl, bound)
		}
	}
	return nil
}

// corrupt overwrites key's state alike in the Go model and in Redis with
// values a manual edit, another tool or a bad deploy could leave: counts
// far out of range or negative, times years ahead, integers Lua cannot hold
// exactly, counters of other windows or not quite integers, and the TTL
// removed. It returns what it wrote.
func corrupt(ctx context.Context, pipe redis.Pipeliner, m model, key string, now int64, counterPeriod time.Duration, calendar bool, rng *rand.Rand) string {
	const year = 365 * 24 * 3600 * 1_000_000
	pick := func(vals ...int64) int64 { return vals[rng.IntN(len(vals))] }
	expires := pick(now+10*year, now+1, now+1000, 1<<60)
	pipe.Del(ctx, key)
	// A corrupted counter is modelled for epoch windows (counterModel).
	if rng.IntN(4) == 0 && !calendar {
		v := corruptCounter(rng, now, counterPeriod)
		m[key] = counterModel(v, now, counterPeriod)
		pipe.Set(ctx, key, v, 0)
		return fmt.Sprintf("%q: %+v", v, m[key])
	}
	if rng.IntN(3) == 0 {
		hits := pick(1<<41, 5, 1<<60, 1)
		m[key] = algorithms.State{Log: []algorithms.LogEntry{{At: now, Seq: 1, Hits: hits}}, ExpiresAt: expires}
		pipe.ZAdd(ctx, key,
			redis.Z{Score: float64(now), Member: fmt.Sprintf("%d:1:%d", now, hits)},
			redis.Z{Score: float64(expires), Member: fmt.Sprintf("~%d", hits)})
		return fmt.Sprintf("%+v", m[key])
	}
	vals := []int64{-1, 0, 3, -1 << 41, 1 << 41, now, now + 10*year, 1 << 60, -(1 << 60)}
	// A packed state is the Registers family's: fixed_window reads it as
	// absent, as the script reads a 32-byte string where it wants an integer.
	st := algorithms.FromRegisters(pick(vals...), pick(vals...), pick(vals...), expires).As(algorithms.Registers)
	m[key] = st
	pipe.Set(ctx, key, scripts.PackRegisters(st), 0)
	return fmt.Sprintf("%+v", st)
}

// ttlBound is twice the longest horizon of the ops on key, in µs, plus the
// rounding of a TTL up to whole ms.
func ttlBound(ops []algorithms.Op, key string) int64 {
	var h time.Duration
	for _, op := range ops {
		if op.Key == key {
			h = max(h, op.Limit.Horizon())
		}
	}
	return 2*h.Microseconds() + 1000
}

// sameCharges compares the charges the take script reported with the Go
// batch's, which memstore reports: undos and leases give hits back through
// either, so they must agree.
func sameCharges(lua []scripts.Charge, goCh []algorithms.KeyCharge) error {
	if len(lua) != len(goCh) {
		return fmt.Errorf("lua reports %d charges, go %d", len(lua), len(goCh))
	}
	for i, l := range lua {
		g := goCh[i]
		if l.Key != g.Key || l.Limit != g.Limit || l.Applied != g.Applied {
			return fmt.Errorf("charge %d: lua %s %+v applied %d, go %s %+v applied %d", i, l.Key, l.Limit, l.Applied, g.Key, g.Limit, g.Applied)
		}
		if !sameCharged(l.Charged, g.Charged) {
			return fmt.Errorf("charge %d of %s: lua state %+v, go %+v", i, l.Key, l.After, g.After)
		}
	}
	return nil
}

// corruptCounter is a Counter value of the window of period p current at
// now, the next one, the one before or any, of a count in or out of range,
// or a string INCRBY would refuse or that Lua cannot hold exactly.
func corruptCounter(rng *rand.Rand, now int64, p time.Duration) string {
	if rng.IntN(4) == 0 {
		return []string{"007", "-5", "1e3", " 12", "12.0", "99999999999999999", "9007199254740993", ""}[rng.IntN(8)]
	}
	us := p.Microseconds()
	start := now - now%us + us*[]int64{0, 1, -1, rng.Int64N(2000) - 1000}[rng.IntN(4)]
	count := []int64{0, 1, 5, algorithms.MaxCount, algorithms.MaxCount + 1, 1 << 42, 9_007_199_254_739}[rng.IntN(7)]
	return scripts.PackCounter(algorithms.Window{Start: start, Count: count}.State(start + us))
}

// counterModel is the Go state of a key holding the Counter value v for
// a limit of period p at now: the window of v's tag nearest to now's (a
// history moves its clock a few hundred windows at most, so no later read
// meets another window of that tag), or a fresh state where the scripts
// read v as absent.
func counterModel(v string, now int64, p time.Duration) algorithms.State {
	us := p.Microseconds()
	st, ok := scripts.UnpackCounter(v, p, time.UnixMicro(now))
	if !ok || st.ExpiresAt != 0 {
		return st
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	index := (now - now%us) / us
	const tags = scripts.CounterTags
	k := index - index%tags + n%tags
	switch {
	case k > index+tags/2:
		k -= tags
	case k <= index-tags/2:
		k += tags
	}
	return algorithms.Window{Start: k * us, Count: n / tags}.State(k*us + us).As(algorithms.Counter)
}

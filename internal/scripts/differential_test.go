package scripts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// The differential test: for every algorithm, sequences of random ops (time
// steps from 0 to beyond the period and a few backwards, hits from 0 to far
// beyond the capacity, limit changes, multi-op batches with repeated keys and
// mixed algorithms, and states corrupted out of every algorithm's range) must
// give the same decisions and leave the same state in Lua on a real
// redis-server as algorithms.TakeAll does in Go, and every TTL must end at
// the state's ExpiresAt (which pkg/algorithms bounds by twice the rules'
// horizon).
const (
	diffSequences = 100
	diffSteps     = 100 // diffSequences*diffSteps = 10^4 steps per algorithm
	// make test runs fewer sequences (RATELIMITD_SOAK: diffSequences):
	// the EVAL script runs the library's code, which FCALL runs at twice
	// its share.
	evalSequences     = 25
	functionSequences = 50
)

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
			differential(t, rdb, queue, alg, testkit.Size(evalSequences, diffSequences))
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
			differential(t, rdb, queue, alg, testkit.Size(functionSequences, diffSequences))
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

func differential(t *testing.T, rdb *redis.Client, queue queueFunc, alg algorithms.Algorithm, sequences int) {
	r := &diffRun{t: t, rdb: rdb, queue: queue, rng: newRand(t), goState: model{}, ttlFor: map[string]int64{}, deadline: map[string]int64{}, months: map[string]int64{}}
	r.seqs = make([]*sequence, sequences)
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
	t.Logf("%d steps: %d ops allowed, %d denied; %d writes kept their key's TTL", sequences*diffSteps, r.allowed, r.denied, r.kept)
	if alg.Info().Counter && r.kept < diffSteps {
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
			if st := r.goState[key]; isCounterState(st) {
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

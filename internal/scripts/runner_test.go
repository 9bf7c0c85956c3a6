package scripts_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// A zero now makes the script read Redis TIME: a token bucket's refill
// anchor is that time in µs.
func TestTakeUsesRedisTime(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	r := scripts.NewRunner()
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Hour}
	before, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	d, err := takeDecisions(r.Take(ctx, rdb, []algorithms.Op{{Key: "clock", Limit: lim, Hits: 1}}, time.Time{}))
	if err != nil {
		t.Fatal(err)
	}
	after := rdb.Time(ctx).Val()
	if !d[0].Allowed || d[0].Remaining != 9 || d[0].ResetAfter != 6*time.Minute {
		t.Fatalf("decision %s", fmtDecision(d[0]))
	}
	st, ok := scripts.UnpackRegisters(0, rdb.Get(ctx, "clock").Val())
	if !ok {
		t.Fatalf("clock holds %q, not a register state", rdb.Get(ctx, "clock").Val())
	}
	anchor, _, _ := scripts.Registers(st)
	if anchor < before.UnixMicro() || anchor > after.UnixMicro() {
		t.Fatalf("script time %d outside Redis TIME %d..%d", anchor, before.UnixMicro(), after.UnixMicro())
	}
}

// go-redis answers NOSCRIPT with EVAL, which also loads the script again
// (the EVALSHA path: Redis 6, or servers that refuse FUNCTION).
func TestTakeAfterScriptFlush(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	r := scripts.NewRunner(scripts.WithoutFunctions())
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: time.Hour}
	op := []algorithms.Op{{Key: "flush", Limit: lim, Hits: 1}}
	takeAfterFlush(t, r, rdb, op, "SCRIPT FLUSH", func() error { return rdb.ScriptFlush(ctx).Err() }, 1, 0)
	if exists := rdb.ScriptExists(ctx, r.Hash()).Val(); len(exists) != 1 || !exists[0] {
		t.Fatal("the script was not loaded again")
	}
}

// The library keeps the TTL arguments it formatted (math.lua's ttl_arg) and
// starts over past a few thousand: every key still gets its own TTL across
// more distinct TTLs than that, each written by its own call.
func TestTTLsPastTheirArgumentCache(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	r := scripts.NewRunner()
	const keys = 5000
	resets := make([]time.Duration, keys)
	taken := make([]time.Time, keys)
	for i := range keys {
		// One GCRA hit of one per period: the TTL is the period, at least
		// an hour, so no key expires before the check on a slow machine.
		lim := algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 1, Period: time.Hour + time.Duration(i+1)*7*time.Second + 3*time.Millisecond}
		d, err := takeDecisions(r.Take(ctx, rdb, []algorithms.Op{{Key: "ttl:" + strconv.Itoa(i), Limit: lim, Hits: 1}}, time.Time{}))
		if err != nil {
			t.Fatal(err)
		}
		resets[i], taken[i] = d[0].ResetAfter, time.Now()
	}
	distinct := map[time.Duration]bool{}
	for i, reset := range resets {
		pttl := rdb.PTTL(ctx, "ttl:"+strconv.Itoa(i)).Val()
		// The TTL has run since the take (plus a second of slack).
		if pttl <= 0 || pttl > reset.Round(time.Millisecond)+time.Millisecond || pttl < reset-time.Since(taken[i])-time.Second {
			t.Fatalf("key %d: PTTL %v, reset %v", i, pttl, reset)
		}
		distinct[reset.Round(time.Millisecond)] = true
	}
	if len(distinct) < 4097 {
		t.Fatalf("%d distinct TTLs, want more than the cache holds", len(distinct))
	}
}

// Every key a take writes has a TTL ending when its state stops mattering;
// checks and denied batches write nothing.
func TestWrittenKeysHaveTTL(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	r := scripts.NewRunner()
	for _, alg := range algorithms.All() {
		lim := algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Hour}
		written, checked := "ttl:"+alg.String(), "check:"+alg.String()
		d, err := takeDecisions(r.Take(ctx, rdb, []algorithms.Op{
			{Key: written, Limit: lim, Hits: 2},
			{Key: checked, Limit: lim, Hits: 0},
		}, time.Time{}))
		if err != nil {
			t.Fatal(err)
		}
		// The TTL is ResetAfter rounded up to whole ms, less what has passed.
		pttl := rdb.PTTL(ctx, written).Val()
		if pttl <= 0 || pttl > d[0].ResetAfter.Round(time.Millisecond)+time.Millisecond || pttl < d[0].ResetAfter-time.Second {
			t.Errorf("%s: PTTL %v, decision %s", alg, pttl, fmtDecision(d[0]))
		}
		if n := rdb.Exists(ctx, checked).Val(); n != 0 {
			t.Errorf("%s: a check created its key", alg)
		}
		denied := "denied:" + alg.String()
		if _, err := r.Take(ctx, rdb, []algorithms.Op{
			{Key: denied, Limit: lim, Hits: 1},
			{Key: written, Limit: lim, Hits: 6},
		}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, denied).Val(); n != 0 {
			t.Errorf("%s: a denied batch wrote a key", alg)
		}
	}
	keys := rdb.Keys(ctx, "*").Val()
	for _, k := range keys {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("key %s has PTTL %v", k, ttl)
		}
	}
	if len(keys) != len(algorithms.All()) {
		t.Errorf("keys %v, want one per algorithm", keys)
	}
}

func TestTakeErrors(t *testing.T) {
	ctx := context.Background()
	r := scripts.NewRunner()
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: time.Hour}
	op := []algorithms.Op{{Key: "k", Limit: lim, Hits: 1}}

	if d, err := takeDecisions(r.Take(ctx, nil, nil, time.Time{})); err != nil || len(d) != 0 {
		t.Fatalf("no ops: %v, %v", d, err)
	}
	for _, now := range []time.Time{time.Unix(-1, 0), time.UnixMicro(scripts.MaxUnixMicro + 1)} {
		if _, err := takeDecisions(r.Take(ctx, nil, op, now)); err == nil || !strings.Contains(err.Error(), "clock range") {
			t.Fatalf("now %v: err %v", now, err)
		}
	}

	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := takeDecisions(r.Take(canceled, rdb, op, time.Time{})); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
	if err := rdb.Set(ctx, "k", "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A key of another type is read as absent and replaced.
	d, err := takeDecisions(r.Take(ctx, rdb, op, time.Time{}))
	if err != nil || !d[0].Allowed || d[0].Remaining != 1 {
		t.Fatalf("take over a string key: %v %v", d, err)
	}
	srv.Stop()
	if _, err := takeDecisions(r.Take(ctx, rdb, op, time.Time{})); err == nil || !strings.HasPrefix(err.Error(), "take script: ") {
		t.Fatalf("stopped redis: %v", err)
	}
}

func TestEncode(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 7, Period: time.Second, Burst: 3, RefillInterval: time.Millisecond, MaxDebt: 2}
	ops := []algorithms.Op{
		{Key: "a", Limit: lim, Hits: math.MaxUint64, Mode: algorithms.Quota},
		{Key: "b", Limit: algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 1}, Hits: 1},
	}
	keys, args, err := scripts.Encode(ops, time.UnixMicro(1_700_000_000_000_001))
	if err != nil {
		t.Fatal(err)
	}
	// ARGV[2] holds each op as eight little-endian binary64: the limit
	// (zeros for one that fails Validate, as the second does), hits clamped
	// to 4 MaxCount, mode.
	want := [][8]float64{
		{float64(algorithms.TokenBucket), 7, 1e6, 3, 1000, 2, 4 << 40, float64(algorithms.Quota)},
		{0, 0, 0, 0, 0, 0, 1, 0},
	}
	if strings.Join(keys, ",") != "a,b" || len(args) != 2 || args[0] != int64(1_700_000_000_000_001) {
		t.Fatalf("keys %v args %q", keys, args)
	}
	packed, ok := args[1].(string)
	if !ok || len(packed) != 64*len(want) {
		t.Fatalf("ops are %T of %d bytes, want a string of %d", args[1], len(packed), 64*len(want))
	}
	for i, w := range want {
		for j, f := range w {
			if got := math.Float64frombits(binary.LittleEndian.Uint64([]byte(packed[64*i+8*j:]))); got != f {
				t.Errorf("op %d field %d = %v, want %v", i, j, got, f)
			}
		}
	}
	if _, args, _ := scripts.Encode(ops, time.Time{}); args[0] != int64(0) {
		t.Fatalf("zero now encodes as %v, want 0 (Redis TIME)", args[0])
	}
}

func TestDecode(t *testing.T) {
	good := []any{int64(1), int64(5), int64(1000), int64(0), int64(3), int64(0), int64(0), int64(7), int64(-1), int64(0)}
	two := make([]algorithms.Op, 2)
	out, err := scripts.Decode(good, two, false, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []algorithms.Decision{
		{Allowed: true, Remaining: 5, ResetAfter: time.Millisecond},
		{ResetAfter: 7 * time.Microsecond, RetryAfter: algorithms.Never},
	}
	if d := out.Decisions; d[0] != want[0] || d[1] != want[1] || !slices.Equal(out.Applied, []uint64{3, 0}) {
		t.Fatalf("decoded %+v, want %+v applied 3, 0", out, want)
	}
	for name, bad := range map[string]any{
		"not an array":     "OK",
		"short":            good[:9],
		"not an integer":   []any{int64(1), "5", int64(0), int64(0), int64(0)},
		"negative":         []any{int64(1), int64(-5), int64(0), int64(0), int64(0)},
		"retry below -1":   []any{int64(0), int64(0), int64(0), int64(-2), int64(0)},
		"negative applied": []any{int64(0), int64(0), int64(0), int64(0), int64(-1)},
	} {
		ops := two
		if name != "short" {
			ops = two[:1]
		}
		if _, err := scripts.Decode(bad, ops, false, false); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// takeAfterFlush runs flush (named what) then op, once per want: each take
// must be allowed with want remaining, the runner loading again what the
// flush dropped.
func takeAfterFlush(t *testing.T, r *scripts.Runner, rdb *redis.Client, op []algorithms.Op, what string, flush func() error, wants ...uint64) {
	t.Helper()
	for i, want := range wants {
		if err := flush(); err != nil {
			t.Fatal(err)
		}
		d, err := takeDecisions(r.Take(context.Background(), rdb, op, time.Time{}))
		if err != nil {
			t.Fatalf("take %d after %s: %v", i, what, err)
		}
		if !d[0].Allowed || d[0].Remaining != want {
			t.Fatalf("take %d after %s: %s", i, what, fmtDecision(d[0]))
		}
	}
}

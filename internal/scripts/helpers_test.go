package scripts_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
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

// newRedis returns a client of a private redis-server with the script loaded.
func newRedis(t testing.TB) *redis.Client {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.ScriptLoad(context.Background(), scripts.Source()).Err(); err != nil {
		t.Fatalf("script load: %v", err)
	}
	return rdb
}

// model is the Go reference: algorithms.TakeAll over a map.
type model map[string]algorithms.State

func (m model) take(ops []algorithms.Op, now time.Time) algorithms.Batch {
	load := func(key string) algorithms.State {
		st := m[key]
		st.Log = slices.Clone(st.Log)
		return st
	}
	b := algorithms.TakeAll(ops, load, now)
	for k, st := range b.Writes {
		m[k] = st
	}
	return b
}

// stored is a key's state as read back from Redis.
type stored struct {
	// kind is "none", "string" (registers), "counter" (a Counter value),
	// "zset" (a log) or another Redis type.
	kind string
	st   algorithms.State
	raw  string // a counter's value
	sum  int64  // the zset's meta sum
	err  string
}

// parseRegisters reads a register state's string (lua/registers.lua) as
// stored, out-of-range values included: a check leaves a corrupted state in
// place, and the Go model holds the same values.
func parseRegisters(v string) stored {
	if len(v) != 32 {
		return stored{kind: "string", err: fmt.Sprintf("value %q is not a packed register state", v)}
	}
	var regs [4]int64
	for i := range regs {
		regs[i] = int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[8*i:]))))
	}
	return stored{kind: "string", st: scripts.FromRegisters(0, regs[0], regs[1], regs[2], regs[3])}
}

// parseZSet reads a ZRANGE WITHSCORES reply.
func parseZSet(zs []redis.Z) stored {
	s := stored{kind: "zset"}
	metas := 0
	for _, z := range zs {
		m := z.Member.(string)
		if rest, ok := strings.CutPrefix(m, "~"); ok {
			metas++
			s.sum, _ = strconv.ParseInt(rest, 10, 64)
			s.st.ExpiresAt = int64(z.Score)
			continue
		}
		parts := strings.Split(m, ":")
		if len(parts) != 3 {
			s.err = "member " + m
			continue
		}
		at, _ := strconv.ParseInt(parts[0], 10, 64)
		seq, _ := strconv.ParseInt(parts[1], 10, 64)
		hits, _ := strconv.ParseInt(parts[2], 10, 64)
		if float64(at) != z.Score {
			s.err = fmt.Sprintf("member %s scored %v", m, z.Score)
		}
		s.st.Log = append(s.st.Log, algorithms.LogEntry{At: at, Seq: seq, Hits: hits})
	}
	if metas != 1 {
		s.err = fmt.Sprintf("%d meta members", metas)
	}
	sortLog(s.st.Log)
	return s
}

func sortLog(l []algorithms.LogEntry) {
	slices.SortFunc(l, func(x, y algorithms.LogEntry) int {
		if x.At != y.At {
			return int(x.At - y.At)
		}
		return int(x.Seq - y.Seq)
	})
}

// live reports whether a state still matters at now.
func live(st algorithms.State, now int64) bool {
	if st.ExpiresAt == 0 {
		return false
	}
	return now < st.ExpiresAt
}

// sameState compares the Go state of a key with what Redis holds, both read
// at now; a state at or past its ExpiresAt counts as absent. A counter may
// be of epoch windows or of calendar months (its tag says which only where
// the two differ).
func sameState(want algorithms.State, got stored, now int64) error {
	return sameStateMonths(want, got, now, -1)
}

// sameStateMonths is sameState for a key whose counters count in windows
// of months calendar months (0: epoch windows; -1: either).
func sameStateMonths(want algorithms.State, got stored, now, months int64) error {
	if got.err != "" {
		return fmt.Errorf("malformed %s: %s", got.kind, got.err)
	}
	if isCounterState(want) || got.kind == "counter" {
		return sameCounter(want, got, now, months)
	}
	wantLive := live(want, now)
	gotLive := got.kind != "none" && live(got.st, now)
	switch {
	case !wantLive && !gotLive:
		return nil
	case wantLive != gotLive:
		return fmt.Errorf("go state %+v (live %v), redis %s %+v (live %v)", want, wantLive, got.kind, got.st, gotLive)
	}
	if len(want.Log) > 0 {
		if got.kind != "zset" {
			return fmt.Errorf("go has a log %+v, redis a %s", want, got.kind)
		}
		var sum int64
		for _, e := range want.Log {
			sum += e.Hits
		}
		w := slices.Clone(want.Log)
		sortLog(w)
		if !slices.Equal(w, got.st.Log) || want.ExpiresAt != got.st.ExpiresAt || sum != got.sum {
			return fmt.Errorf("log: go %+v sum %d, redis %+v sum %d", want, sum, got.st, got.sum)
		}
		return nil
	}
	if got.kind != "string" {
		return fmt.Errorf("go has registers %+v, redis a %s", want, got.kind)
	}
	if !sameRegisters(want, got.st) {
		return fmt.Errorf("registers: go %+v, redis %+v", want, got.st)
	}
	return nil
}

// sameCounter compares a Counter state with what Redis holds: the value it
// packs to, whether or not its window is over (a script never rewrites a
// counter it reads as another window's, and the recording scripts set no
// TTL), or nothing where the state no longer matters.
func sameCounter(want algorithms.State, got stored, now, months int64) error {
	switch {
	case got.kind == "none" && !live(want, now):
		return nil
	case !isCounterState(want):
		return fmt.Errorf("go state %+v, redis a counter %q", want, got.raw)
	case got.kind != "counter":
		return fmt.Errorf("go counter %+v, redis %s %q %+v", want, got.kind, got.raw, got.st)
	case months < 0 && (got.raw == scripts.PackCounterMonths(want, 0) || got.raw == scripts.PackCounterMonths(want, 1)):
		return nil
	case got.raw != scripts.PackCounterMonths(want, max(months, 0)):
		return fmt.Errorf("go counter %+v packs to %q, redis %q %+v", want, scripts.PackCounterMonths(want, max(months, 0)), got.raw, got.st)
	}
	return nil
}

// isCounter reports whether v is a value lua/counter.lua reads as a count.
func isCounter(v string) bool {
	_, ok := scripts.UnpackCounter(v, time.Second, time.UnixMicro(0))
	return ok
}

// isCounterState reports whether st was written by fixed_window (a
// counter): marking it so leaves it as it is.
func isCounterState(st algorithms.State) bool {
	return st.ExpiresAt != 0 && st.Equal(algorithms.StateOf(algorithms.FixedWindow, algorithms.ViewOf[algorithms.Window](st), st.ExpiresAt))
}

// sameRegisters compares two register states field by field as Redis keeps
// them (a, b, c, e).
func sameRegisters(x, y algorithms.State) bool {
	xa, xb, xc := scripts.Registers(x)
	ya, yb, yc := scripts.Registers(y)
	return xa == ya && xb == yb && xc == yc && x.ExpiresAt == y.ExpiresAt
}

// stateRead holds the pipelined commands that read one key back.
type stateRead struct {
	key  string
	typ  *redis.StatusCmd
	str  *redis.StringCmd
	zset *redis.ZSliceCmd
}

func queueRead(ctx context.Context, pipe redis.Pipeliner, key string) *stateRead {
	return &stateRead{
		key:  key,
		typ:  pipe.Type(ctx, key),
		str:  pipe.Get(ctx, key),
		zset: pipe.ZRangeWithScores(ctx, key, 0, -1),
	}
}

func (r *stateRead) result() stored {
	switch t := r.typ.Val(); t {
	case "string":
		v := r.str.Val()
		switch {
		case isCounter(v):
			return stored{kind: "counter", raw: v}
		case len(v) != 32:
			// Neither layout: read as absent, as a corrupted value is.
			return stored{kind: "garbage", raw: v}
		}
		return parseRegisters(v)
	case "zset":
		return parseZSet(r.zset.Val())
	default:
		return stored{kind: t}
	}
}

// checkTTL verifies the TTL (ms) a take gave a key that now holds st: the
// time to its ExpiresAt rounded up to whole ms, at least 1 ms, so Redis never
// drops a state before it stops mattering.
func checkTTL(key string, pttl int64, st stored, now int64) error {
	if st.kind == "none" {
		return nil
	}
	want := max((st.st.ExpiresAt-now+999)/1000, 1)
	if pttl != want {
		return fmt.Errorf("key %s TTL %dms, want %dms", key, pttl, want)
	}
	return nil
}

// fmtDecision makes a failure readable.
func fmtDecision(d algorithms.Decision) string {
	retry := d.RetryAfter.String()
	if d.RetryAfter == algorithms.Never {
		retry = "never"
	}
	return fmt.Sprintf("{allowed=%v remaining=%d reset=%s retry=%s}", d.Allowed, d.Remaining, d.ResetAfter, retry)
}

// newRand seeds from RATELIMITD_SEED when set, to replay a logged failure,
// else from the clock.
func newRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("RATELIMITD_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("RATELIMITD_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed>>1))
}

// takeDecisions is an Outcome's decisions, for tests that judge those.
func takeDecisions(o scripts.Outcome, err error) ([]algorithms.Decision, error) {
	return o.Decisions, err
}

// takeCharges is an Outcome's decisions and charges.
func takeCharges(o scripts.Outcome, err error) ([]algorithms.Decision, []scripts.Charge, error) {
	return o.Decisions, o.Charges, err
}

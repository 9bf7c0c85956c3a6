package scripts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// commandCalls is INFO commandstats' calls per command (lower case).
func commandCalls(t *testing.T, rdb *redis.Client) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, s := range redistest.CommandStats(t, rdb) {
		out[name] = int(s.Calls)
	}
	return out
}

// The runner calls the take as FCALL, loads the library on a server that
// lacks it (fresh, restarted, FUNCTION FLUSH) and retries once, and never
// runs the EVALSHA path while FUNCTION works.
func TestTakeAfterFunctionFlush(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	r := scripts.NewRunner()
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Period: time.Hour}
	op := []algorithms.Op{{Key: "fflush", Limit: lim, Hits: 1}}
	// The first flush finds nothing: the server is fresh, which is the same.
	takeAfterFlush(t, r, rdb, op, "FUNCTION FLUSH", func() error { return rdb.FunctionFlush(ctx).Err() }, 2, 1, 0)
	d, err := takeDecisions(r.Take(ctx, rdb, op, time.Time{}))
	if err != nil || d[0].Allowed {
		t.Fatalf("fourth take: %v %v", d, err)
	}
	calls := commandCalls(t, rdb)
	// 4 takes + 3 "Function not found" answers; 3 loads; no script at all.
	if calls["fcall"] != 7 || calls["function|load"] != 3 || calls["evalsha"]+calls["eval"] != 0 || !r.UsesFunctions() {
		t.Errorf("commands %v, uses functions %v", calls, r.UsesFunctions())
	}
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	if err != nil || len(libs) != 1 {
		t.Fatalf("libraries %+v %v, want ours alone", libs, err)
	}
	names := map[string]bool{}
	for _, f := range libs[0].Functions {
		names[f.Name] = true
	}
	if len(names) != 3 || !names[scripts.TakeFunction()] || !names[scripts.UndoFunction()] || !names[strings.Replace(scripts.TakeFunction(), "_take_", "_takes_", 1)] {
		t.Errorf("library functions %v, want take, takes and undo", names)
	}
}

// A server that refuses FUNCTION (here an ACL user without FCALL, as a
// Redis 6 answers "unknown command") makes the runner use EVALSHA, once
// and for all, and the take and undo still work.
func TestFallsBackToEvalsha(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Do(ctx, "ACL", "SETUSER", "nofcall", "on", ">pw", "~*", "+@all", "-fcall", "-function").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "nofcall", Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	r := scripts.NewRunner()
	lim := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 2, Period: time.Hour}
	ops := []algorithms.Op{{Key: "{fb}a", Limit: lim, Hits: 2}}
	for i := range 3 {
		d, charges, err := takeCharges(r.TakeCharged(ctx, rdb, ops, time.Time{}))
		if err != nil || !d[0].Allowed || len(charges) != 1 {
			t.Fatalf("take %d: %v %+v %v", i, d, charges, err)
		}
		if r.UsesFunctions() {
			t.Fatal("runner still uses FCALL after NOPERM")
		}
		if err := r.Undo(ctx, rdb, charges, time.Time{}); err != nil {
			t.Fatalf("undo %d: %v", i, err)
		}
	}
	calls := commandCalls(t, admin)
	if calls["fcall"] != 0 || calls["evalsha"] != 6 {
		t.Errorf("commands %v: want one refused FCALL (not counted) then EVALSHA only", calls)
	}
}

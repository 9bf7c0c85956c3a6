package scripts_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/procstat"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// BenchmarkUndoForms is redis-server's CPU (from /proc, so Linux only) per
// undo op of the lease returns' kind: batches of 80 fixed_window charges
// of 2 hits, as a sweep or a drain sends them, in the short form
// (scripts.EncodeUndo) and in the long one every charge used before. Only
// the undo calls are timed; the takes that made the charges are not. The
// CPU counts in 10 ms ticks: use -benchtime 200x or more, and -count for
// the A B A B pairs that only compare on a shared machine.
func BenchmarkUndoForms(b *testing.B) {
	ctx := context.Background()
	rdb, pid := benchRedis(b, 0, scripts.Library())
	r := scripts.NewRunner()
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1e9, Period: time.Hour}
	const batch, keys = 80, 4096
	forms := []struct {
		name   string
		encode func([]scripts.Charge, time.Time) ([]string, []any, error)
	}{
		{"short", scripts.EncodeUndo},
		{"long", scripts.EncodeUndoLong},
	}
	for _, f := range forms {
		b.Run(f.name, func(b *testing.B) {
			undos := make([][]any, b.N)
			calls := make([][]string, b.N)
			for i := range b.N {
				ops := make([]algorithms.Op, batch)
				for j := range ops {
					ops[j] = algorithms.Op{Key: "undo:{" + strconv.Itoa((i*batch+j)%keys) + "}", Limit: lim, Hits: 2, Mode: algorithms.Spare}
				}
				// One slot per batch is what redisstore sends; a single
				// node takes any keys, and this one has no other load.
				_, charges, err := takeCharges(r.TakeCharged(ctx, rdb, ops, time.Time{}))
				if err != nil || len(charges) != batch {
					b.Fatalf("take: %d charges, %v", len(charges), err)
				}
				if calls[i], undos[i], err = f.encode(charges, time.Time{}); err != nil {
					b.Fatal(err)
				}
			}
			before, err := procstat.CPUTime(pid)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				n, err := rdb.FCall(ctx, scripts.UndoFunction(), calls[i], undos[i]...).Int()
				if err != nil || n != batch {
					b.Fatalf("undo: %d of %d undone, %v", n, batch, err)
				}
			}
			b.StopTimer()
			after, err := procstat.CPUTime(pid)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((after-before).Microseconds())/float64(b.N*batch), "redis-µs/op")
		})
	}
}

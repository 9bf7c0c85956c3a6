package algorithms

import (
	"slices"
	"testing"
	"time"
)

// TestCharges: what an admitted batch reports charged per key, the rules
// take.lua's charge_of follows (so memstore and redisstore give leases the
// same charges), and that undoing a charge gives back exactly its hits.
func TestCharges(t *testing.T) {
	fw := func(n uint64) Limit { return Limit{Algorithm: FixedWindow, Requests: n, Period: time.Minute} }
	log := Limit{Algorithm: SlidingLog, Requests: 10, Period: time.Minute}
	invalid := Limit{Algorithm: FixedWindow, Requests: 5} // no period
	yearLog := Limit{Algorithm: SlidingLog, Requests: 2, Period: 365 * 24 * time.Hour}
	dayLog := Limit{Algorithm: SlidingLog, Requests: 1, Period: 24 * time.Hour}
	window := func(count int64) State {
		return Window{Start: t0.UnixMicro() - 20e6, Count: count}.State(t0.UnixMicro() + 40e6)
	}
	type want struct {
		key   string
		limit Limit
		hits  uint64
		after State
	}
	tests := map[string]struct {
		stored map[string]State
		ops    []Op
		want   []want
	}{
		"one charge per key written, in batch order": {
			ops:  []Op{{Key: "b", Limit: fw(5), Hits: 2}, {Key: "a", Limit: fw(5), Hits: 1}, {Key: "c", Limit: fw(5), Hits: 0}},
			want: []want{{"b", fw(5), 2, window(2)}, {"a", fw(5), 1, window(1)}},
		},
		"an allowed Spare op adds to the key's Enforce charge; the last op's limit": {
			ops:  []Op{{Key: "a", Limit: fw(5), Hits: 1}, {Key: "a", Limit: fw(6), Hits: 3, Mode: Spare}},
			want: []want{{"a", fw(6), 4, window(4)}},
		},
		"a denied Spare op charges nothing": {
			ops:  []Op{{Key: "a", Limit: fw(5), Hits: 4}, {Key: "a", Limit: fw(5), Hits: 3, Mode: Spare}, {Key: "b", Limit: fw(1), Hits: 2, Mode: Spare}},
			want: []want{{"a", fw(5), 4, window(4)}},
		},
		"a Shadow op recorded past its limit is charged in full": {
			ops:  []Op{{Key: "a", Limit: fw(2), Hits: 3, Mode: Shadow}},
			want: []want{{"a", fw(2), 3, window(3)}},
		},
		"a key usage charged has no charge": {
			ops:  []Op{{Key: "a", Limit: fw(5), Hits: 1}, {Key: "a", Limit: fw(5), Hits: 2, Usage: true}, {Key: "b", Limit: fw(5), Hits: 2, Usage: true}},
			want: nil,
		},
		"a usage op that charged nothing (invalid limit) leaves the key's charge": {
			ops:  []Op{{Key: "a", Limit: fw(5), Hits: 1}, {Key: "a", Limit: invalid, Hits: 2, Usage: true, Mode: Shadow}},
			want: []want{{"a", fw(5), 1, window(1)}},
		},
		"a denied batch has no charges": {
			ops:  []Op{{Key: "a", Limit: fw(5), Hits: 1}, {Key: "b", Limit: fw(5), Hits: 2, Mode: Spare}, {Key: "d", Limit: fw(1), Hits: 2}},
			want: nil,
		},
		"sliding_log: only the entries the batch added": {
			stored: map[string]State{"l": {Log: []LogEntry{{At: t0.UnixMicro() - 1e6, Seq: 1, Hits: 2}, {At: t0.UnixMicro(), Seq: 1, Hits: 1}}, ExpiresAt: t0.UnixMicro() + 60e6}},
			ops:    []Op{{Key: "l", Limit: log, Hits: 3}, {Key: "l", Limit: log, Hits: 1, Mode: Spare}},
			want:   []want{{"l", log, 4, State{Log: []LogEntry{{At: t0.UnixMicro(), Seq: 2, Hits: 3}, {At: t0.UnixMicro(), Seq: 3, Hits: 1}}, ExpiresAt: t0.UnixMicro() + 60e6}}},
		},
		// The second op's limit reads the stored log as out of range (its
		// ExpiresAt is a year ahead): it starts afresh, dropping the first
		// op's entry, and its own entry equals the stored one.
		"sliding_log: an op reading the log as fresh drops what the batch added before": {
			stored: map[string]State{"l": {Log: []LogEntry{{At: t0.UnixMicro(), Seq: 1, Hits: 1}}, ExpiresAt: t0.UnixMicro() + yearLog.Period.Microseconds()}},
			ops:    []Op{{Key: "l", Limit: yearLog, Hits: 1}, {Key: "l", Limit: dayLog, Hits: 1, Mode: Spare}},
			want:   []want{{"l", dayLog, 2, State{Log: []LogEntry{{At: t0.UnixMicro(), Seq: 1, Hits: 1}}, ExpiresAt: t0.UnixMicro() + dayLog.Period.Microseconds()}}},
		},
		// A refund is never a charge (nothing takes it back); the ops it
		// came before charge the refunded key as usual, and undoing them
		// leaves the key refunded.
		"a refund alone has no charge": {
			stored: map[string]State{"a": window(4)},
			ops:    []Op{{Key: "a", Limit: fw(5), Hits: 3, Mode: NegativeHits}},
			want:   nil,
		},
		"an admission after a refund on its key is charged its own hits": {
			stored: map[string]State{"a": window(4)},
			ops:    []Op{{Key: "a", Limit: fw(5), Hits: 2}, {Key: "a", Limit: fw(5), Hits: 3, Mode: NegativeHits}},
			want:   []want{{"a", fw(5), 2, window(3)}},
		},
		"sliding_log: a refund first, then the entries the batch added": {
			stored: map[string]State{"l": {Log: []LogEntry{{At: t0.UnixMicro() - 1e6, Seq: 1, Hits: 2}, {At: t0.UnixMicro(), Seq: 1, Hits: 1}}, ExpiresAt: t0.UnixMicro() + 60e6}},
			ops:    []Op{{Key: "l", Limit: log, Hits: 3}, {Key: "l", Limit: log, Hits: 1, Mode: NegativeHits}},
			want:   []want{{"l", log, 3, State{Log: []LogEntry{{At: t0.UnixMicro(), Seq: 1, Hits: 3}}, ExpiresAt: t0.UnixMicro() + 60e6}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			load := func(key string) State {
				st := tc.stored[key]
				st.Log = slices.Clone(st.Log)
				return st
			}
			ds, writes := TakeAll(tc.ops, load, t0)
			got := Charges(tc.ops, ds, load, writes, t0)
			if len(got) != len(tc.want) {
				t.Fatalf("charges %+v, want %+v", got, tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Key != w.key || g.Limit != w.limit || g.Hits != w.hits || g.After.regs != w.after.regs ||
					g.After.ExpiresAt != w.after.ExpiresAt || !slices.Equal(g.After.Log, w.after.Log) {
					t.Errorf("charge %d = %+v, want %+v", i, g, w)
				}
				// Undone at once, a charge leaves the key as the batch found
				// it, but for the batch's refunds.
				undone := Undo(g.Limit, writes[g.Key], g.Charged, t0)
				before := load(g.Key)
				for _, op := range tc.ops {
					if op.Key == g.Key && op.Mode == NegativeHits {
						_, before = Refund(op.Limit, before, op.Hits, t0)
					}
				}
				if d, _ := Take(g.Limit, undone, 0, t0); d != first(Take(g.Limit, before, 0, t0)) {
					t.Errorf("charge %d undone: %s, before the batch %s", i, fmtD(d), fmtD(first(Take(g.Limit, before, 0, t0))))
				}
			}
		})
	}
}

func first(d Decision, _ State) Decision { return d }

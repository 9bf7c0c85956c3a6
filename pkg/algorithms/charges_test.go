package algorithms

import (
	"slices"
	"testing"
	"time"
)

// TestCharges: what an admitted batch reports charged per key, the rules
// take.lua's charge_of follows (so memstore and redisstore give leases the
// same charges), and that undoing a charge gives back exactly its hits.
// The limits and states of chargesCases (fwMinute: see TestTakeAll).
var (
	chargesLog     = Limit{Algorithm: SlidingLog, Requests: 10, Period: time.Minute}
	chargesInvalid = Limit{Algorithm: FixedWindow, Requests: 5} // no period
	chargesYearLog = Limit{Algorithm: SlidingLog, Requests: 2, Period: 365 * 24 * time.Hour}
	chargesDayLog  = Limit{Algorithm: SlidingLog, Requests: 1, Period: 24 * time.Hour}
)

// chargesWindow is the state of a fwMinute key holding count at t0.
func chargesWindow(count int64) State {
	return Window{Start: t0.UnixMicro() - 20e6, Count: count}.State(t0.UnixMicro() + 40e6)
}

// wantCharge is one charge Charges must report.
type wantCharge struct {
	key   string
	limit Limit
	hits  uint64
	after State
}

// chargesCase is a batch run at t0 on stored states, and its charges.
type chargesCase struct {
	stored map[string]State
	ops    []Op
	want   []wantCharge
}

var chargesCases = map[string]chargesCase{
	"one charge per key written, in batch order": {
		ops:  []Op{{Key: "b", Limit: fwMinute(5), Hits: 2}, {Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "c", Limit: fwMinute(5), Hits: 0}},
		want: []wantCharge{{"b", fwMinute(5), 2, chargesWindow(2)}, {"a", fwMinute(5), 1, chargesWindow(1)}},
	},
	"an allowed Spare op adds to the key's Enforce charge; the last op's limit": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "a", Limit: fwMinute(6), Hits: 3, Mode: Spare}},
		want: []wantCharge{{"a", fwMinute(6), 4, chargesWindow(4)}},
	},
	"a denied Spare op charges nothing": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 4}, {Key: "a", Limit: fwMinute(5), Hits: 3, Mode: Spare}, {Key: "b", Limit: fwMinute(1), Hits: 2, Mode: Spare}},
		want: []wantCharge{{"a", fwMinute(5), 4, chargesWindow(4)}},
	},
	"a Shadow op recorded past its limit is charged in full": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 3, Mode: Shadow}},
		want: []wantCharge{{"a", fwMinute(2), 3, chargesWindow(3)}},
	},
	"a key usage charged has no charge": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "a", Limit: fwMinute(5), Hits: 2, Usage: true}, {Key: "b", Limit: fwMinute(5), Hits: 2, Usage: true}},
		want: nil,
	},
	"a usage op that charged nothing (chargesInvalid limit) leaves the key's charge": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "a", Limit: chargesInvalid, Hits: 2, Usage: true, Mode: Shadow}},
		want: []wantCharge{{"a", fwMinute(5), 1, chargesWindow(1)}},
	},
	"a denied batch has no charges": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "b", Limit: fwMinute(5), Hits: 2, Mode: Spare}, {Key: "d", Limit: fwMinute(1), Hits: 2}},
		want: nil,
	},
	"sliding_log: only the entries the batch added": {
		stored: map[string]State{"l": {Log: []LogEntry{{At: t0.UnixMicro() - 1e6, Seq: 1, Hits: 2}, {At: t0.UnixMicro(), Seq: 1, Hits: 1}}, ExpiresAt: t0.UnixMicro() + 60e6}},
		ops:    []Op{{Key: "l", Limit: chargesLog, Hits: 3}, {Key: "l", Limit: chargesLog, Hits: 1, Mode: Spare}},
		want:   []wantCharge{{"l", chargesLog, 4, State{Log: []LogEntry{{At: t0.UnixMicro(), Seq: 2, Hits: 3}, {At: t0.UnixMicro(), Seq: 3, Hits: 1}}, ExpiresAt: t0.UnixMicro() + 60e6}}},
	},
	// The second op's limit reads the stored chargesLog as out of range (its
	// ExpiresAt is a year ahead): it starts afresh, dropping the first
	// op's entry, and its own entry equals the stored one.
	"sliding_log: an op reading the chargesLog as fresh drops what the batch added before": {
		stored: map[string]State{"l": {Log: []LogEntry{{At: t0.UnixMicro(), Seq: 1, Hits: 1}}, ExpiresAt: t0.UnixMicro() + chargesYearLog.Period.Microseconds()}},
		ops:    []Op{{Key: "l", Limit: chargesYearLog, Hits: 1}, {Key: "l", Limit: chargesDayLog, Hits: 1, Mode: Spare}},
		want:   []wantCharge{{"l", chargesDayLog, 2, State{Log: []LogEntry{{At: t0.UnixMicro(), Seq: 1, Hits: 1}}, ExpiresAt: t0.UnixMicro() + chargesDayLog.Period.Microseconds()}}},
	},
	// A refund is never a charge (nothing takes it back); the ops it
	// came before charge the refunded key as usual, and undoing them
	// leaves the key refunded.
	"a refund alone has no charge": {
		stored: map[string]State{"a": chargesWindow(4)},
		ops:    []Op{{Key: "a", Limit: fwMinute(5), Hits: 3, Mode: NegativeHits}},
		want:   nil,
	},
	"an admission after a refund on its key is charged its own hits": {
		stored: map[string]State{"a": chargesWindow(4)},
		ops:    []Op{{Key: "a", Limit: fwMinute(5), Hits: 2}, {Key: "a", Limit: fwMinute(5), Hits: 3, Mode: NegativeHits}},
		want:   []wantCharge{{"a", fwMinute(5), 2, chargesWindow(3)}},
	},
	"sliding_log: a refund first, then the entries the batch added": {
		stored: map[string]State{"l": {Log: []LogEntry{{At: t0.UnixMicro() - 1e6, Seq: 1, Hits: 2}, {At: t0.UnixMicro(), Seq: 1, Hits: 1}}, ExpiresAt: t0.UnixMicro() + 60e6}},
		ops:    []Op{{Key: "l", Limit: chargesLog, Hits: 3}, {Key: "l", Limit: chargesLog, Hits: 1, Mode: NegativeHits}},
		want:   []wantCharge{{"l", chargesLog, 3, State{Log: []LogEntry{{At: t0.UnixMicro(), Seq: 1, Hits: 3}}, ExpiresAt: t0.UnixMicro() + 60e6}}},
	},
}

func TestCharges(t *testing.T) {
	for name, tc := range chargesCases {
		t.Run(name, func(t *testing.T) { checkCharges(t, tc) })
	}
}

// checkCharges runs tc's batch and checks its charges, each one undone at
// once leaving the key as the batch found it, but for the batch's refunds.
func checkCharges(t *testing.T, tc chargesCase) {
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
}

func first(d Decision, _ State) Decision { return d }

package algorithms

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestCharges: what an admitted batch reports charged per key (what
// take.lua reports, so memstore and redisstore give leases and undos the
// same charges), and that undoing them leaves every key as the batch
// denied would have. The limits and states of chargesCases (fwMinute: see
// TestTakeAll).
var (
	chargesLog     = Limit{Algorithm: SlidingLog, Requests: 10, Period: time.Minute}
	chargesInvalid = Limit{Algorithm: FixedWindow, Requests: 5} // no period
	chargesBucket  = Limit{Algorithm: TokenBucket, Requests: 10, Period: time.Hour}
	chargesGCRA    = Limit{Algorithm: GCRA, Requests: 10, Period: time.Hour}
	chargesMeter   = Limit{Algorithm: LeakyBucket, Requests: 10, Period: time.Hour}
)

// chargesWindow is the state of a fwMinute key holding count at t0.
func chargesWindow(count int64) State {
	return Window{Start: t0.UnixMicro() - 20e6, Count: count}.state(t0.UnixMicro() + 40e6)
}

// emptied is lim's state at t0 after its whole capacity was taken then.
func emptied(lim Limit) State {
	_, st := Take(lim, State{}, lim.Capacity(), t0)
	return st
}

// wantCharge is one charge an admitted batch must report.
type wantCharge struct {
	key     string
	limit   Limit
	applied uint64
	after   State
}

// chargesCase is a batch run at t0 on stored states, and its charges;
// inexact: undoing them does not leave the state the batch denied would.
type chargesCase struct {
	stored  map[string]State
	ops     []Op
	want    []wantCharge
	inexact bool
}

var chargesCases = map[string]chargesCase{
	"one charge per key written, in batch order": {
		ops:  []Op{{Key: "b", Limit: fwMinute(5), Hits: 2}, {Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "c", Limit: fwMinute(5), Hits: 0}},
		want: []wantCharge{{"b", fwMinute(5), 2, chargesWindow(2)}, {"a", fwMinute(5), 1, chargesWindow(1)}},
	},
	"an allowed Spare op adds to the key's Enforce charge": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "a", Limit: fwMinute(5), Hits: 3, Mode: Spare}},
		want: []wantCharge{{"a", fwMinute(5), 4, chargesWindow(4)}},
	},
	"a denied Spare op charges nothing": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 4}, {Key: "a", Limit: fwMinute(5), Hits: 3, Mode: Spare}, {Key: "b", Limit: fwMinute(1), Hits: 2, Mode: Spare}},
		want: []wantCharge{{"a", fwMinute(5), 4, chargesWindow(4)}},
	},
	"a Shadow op recorded past its limit is charged what it counted": {
		ops:  []Op{{Key: "a", Limit: fwMinute(2), Hits: 3, Mode: Shadow}},
		want: []wantCharge{{"a", fwMinute(2), 3, chargesWindow(3)}},
	},
	"a Shadow op past an empty bucket is charged down to its floor only": {
		stored: map[string]State{"b": emptied(chargesBucket)},
		ops:    []Op{{Key: "b", Limit: chargesBucket, Hits: 30, Mode: Shadow}},
		want:   []wantCharge{{"b", chargesBucket, 10, Bucket{Last: t0.UnixMicro(), Tokens: -10}.state(t0.UnixMicro() + 2*3600e6)}},
	},
	"a Shadow op past a full meter is charged up to twice its capacity only": {
		stored: map[string]State{"m": emptied(chargesMeter)},
		ops:    []Op{{Key: "m", Limit: chargesMeter, Hits: 30, Mode: Shadow}},
		want:   []wantCharge{{"m", chargesMeter, 10, Meter{Last: t0.UnixMicro(), Level: 20}.state(t0.UnixMicro() + 2*3600e6)}},
	},
	"a Shadow op past a spent gcra is charged up to two bursts ahead only": {
		stored: map[string]State{"g": emptied(chargesGCRA)},
		ops:    []Op{{Key: "g", Limit: chargesGCRA, Hits: 30, Mode: Shadow}},
		want:   []wantCharge{{"g", chargesGCRA, 10, Arrival{TAT: t0.UnixMicro() + 2*3600e6}.state(t0.UnixMicro() + 2*3600e6)}},
	},
	"a key usage alone charged has no charge; one an admission also charged, the admission's": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "a", Limit: fwMinute(5), Hits: 2, Usage: true}, {Key: "b", Limit: fwMinute(5), Hits: 2, Usage: true}},
		want: []wantCharge{{"a", fwMinute(5), 1, chargesWindow(3)}},
	},
	// 2 tokens left: the admission takes them, the usage hits the floor;
	// without the admission the usage alone reaches the same floor.
	"an admission a bucket's floor absorbed of the usage after it is no charge": {
		stored: map[string]State{"b": Bucket{Last: t0.UnixMicro(), Tokens: 2}.state(t0.UnixMicro() + 3600e6)},
		ops:    []Op{{Key: "b", Limit: chargesBucket, Hits: 2}, {Key: "b", Limit: chargesBucket, Hits: 30, Usage: true}},
		want:   nil,
	},
	"a key named under two limits has no charge": {
		ops:     []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "a", Limit: chargesInvalid, Hits: 2, Usage: true, Mode: Shadow}},
		want:    nil,
		inexact: true, // its admission stays charged: under-admission
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
	"sliding_log: not the entries of usage": {
		ops:  []Op{{Key: "l", Limit: chargesLog, Hits: 3, Usage: true}, {Key: "l", Limit: chargesLog, Hits: 2, Mode: Shadow}},
		want: []wantCharge{{"l", chargesLog, 2, State{Log: []LogEntry{{At: t0.UnixMicro(), Seq: 2, Hits: 2}}, ExpiresAt: t0.UnixMicro() + 60e6}}},
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

// checkCharges runs tc's batch and checks its charges, and that undoing
// them leaves every key as the batch denied leaves it.
func checkCharges(t *testing.T, tc chargesCase) {
	load := func(key string) State {
		st := tc.stored[key]
		st.Log = slices.Clone(st.Log)
		return st
	}
	b := TakeAll(tc.ops, load, t0)
	if len(b.Charges) != len(tc.want) {
		t.Fatalf("charges %+v, want %+v", b.Charges, tc.want)
	}
	for i, w := range tc.want {
		g := b.Charges[i]
		if g.Key != w.key || g.Limit != w.limit || g.Applied != w.applied || g.After.regs != w.after.regs ||
			g.After.ExpiresAt != w.after.ExpiresAt || !slices.Equal(g.After.Log, w.after.Log) {
			t.Errorf("charge %d = %+v, want %+v", i, g, w)
		}
	}
	if err := undoneAsDenied(tc.ops, load, b, t0, t0); err != "" && !tc.inexact {
		t.Error(err)
	}
}

// undoneAsDenied holds the writes of the admitted batch b of ops, its
// charges undone at undo, to what the batch denied leaves (ops with one
// more op on a key of its own that denies it), compared in Canonical form
// at undo; it returns what differs.
func undoneAsDenied(ops []Op, load func(string) State, b Batch, at, undo time.Time) string {
	deny := Op{Key: "\x00deny", Hits: 1} // an invalid limit
	denied := TakeAll(append(slices.Clone(ops), deny), load, at)
	for _, op := range ops {
		st, ok := b.Writes[op.Key]
		if !ok {
			st = load(op.Key)
		}
		for _, c := range b.Charges {
			if c.Key == op.Key {
				st = Undo(st, c, undo)
			}
		}
		want, ok := denied.Writes[op.Key]
		if !ok {
			want = load(op.Key)
		}
		if got, w := op.Limit.Canonical(st, undo), op.Limit.Canonical(want, undo); !got.Equal(w) {
			return "key " + op.Key + ": undone " + fmtState(got) + ", denied " + fmtState(w)
		}
	}
	return ""
}

// TestUndoLeavesTheDeniedState: on random admitted batches of every
// algorithm, mode and history (a key named twice, usage and refunds among
// the ops, one limit per key as every config names it), undoing the
// charges leaves every key exactly as the batch denied would have, at once
// and later on while nothing else touches the keys.
func TestUndoLeavesTheDeniedState(t *testing.T) {
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(alg), 23))
			keys := []string{"a", "b", "c"}
			undone := 0
			for trial := range 2000 {
				limits := map[string]Limit{}
				stored := map[string]State{}
				now := t0.Add(time.Duration(rng.Int64N(1e12)) * us)
				for _, k := range keys {
					limits[k] = maybeCalendar(rng, randLimit(rng, alg, true))
					for range rng.IntN(4) {
						now = now.Add(randStep(rng, limits[k]))
						_, stored[k] = Record(limits[k], stored[k], randHits(rng, limits[k]), now)
					}
				}
				ops := make([]Op, 1+rng.IntN(4))
				for i := range ops {
					k := keys[rng.IntN(len(keys))]
					ops[i] = Op{Key: k, Limit: limits[k], Hits: randHits(rng, limits[k]), Mode: Mode(rng.IntN(int(NegativeHits) + 1)), Usage: rng.IntN(4) == 0}
				}
				load := func(key string) State {
					st := stored[key]
					st.Log = slices.Clone(st.Log)
					return st
				}
				b := TakeAll(ops, load, now)
				if VerdictOf(ops, b.Decisions).Denied() {
					continue
				}
				undone += len(b.Charges)
				later := now.Add(randStep(rng, limits[keys[0]]))
				for _, at := range []time.Time{now, later} {
					if err := undoneAsDenied(ops, load, b, now, at); err != "" {
						t.Fatalf("trial %d %+v undone at +%s: %s\nops %+v\ncharges %+v", trial, limits, at.Sub(now), err, ops, b.Charges)
					}
				}
			}
			if undone < 300 {
				t.Errorf("only %d charges were undone", undone)
			}
		})
	}
}

func fmtState(st State) string {
	if st.ExpiresAt == 0 {
		return "fresh"
	}
	return fmt.Sprintf("%+v", st)
}

// sameCharges reports whether two batches' charges are the same.
func sameCharges(a, b []Charge) bool {
	return slices.EqualFunc(a, b, func(x, y Charge) bool {
		return x.Key == y.Key && x.Limit == y.Limit && x.Applied == y.Applied && x.After.Equal(y.After)
	})
}

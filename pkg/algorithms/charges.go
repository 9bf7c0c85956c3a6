package algorithms

import (
	"slices"
	"time"
)

// KeyCharge is what an admitted batch charged one key, with the key and the
// limit an Undo of it needs (store.Charge and the scripts' Charge are this
// type).
type KeyCharge struct {
	Key   string
	Limit Limit
	Charged
}

// Charges is what an admitted batch of ops charged at now, computed from
// TakeAll's decisions and writes and the states its load returned
// (before), exactly as take.lua's charge_of reports it in Redis, so that
// every store gives the same charges back: one per key written, in the
// order the batch first names them, where
//
//   - Hits is the sum of the hits of the non-usage ops that charged the key:
//     allowed ones, and Shadow and Quota ops recorded past their limits
//     (a Spare or Enforce op that did not fit charged nothing);
//   - Limit is the last such op's;
//   - After is the state written; for sliding_log only the entries the
//     batch added (what Undo removes), with the log's ExpiresAt, and no
//     charge when it added none that are still there.
//
// A key a usage op charged gets no charge: usage is never given back, and
// taking back the other hits could return room a bucket's floor absorbed of
// the usage. A NegativeHits op (a refund) is no charge at all: nothing takes a refund
// back. Nor does a key whose state ends in another family than its
// last charging op's (a batch naming one key under two algorithms, which
// no config makes): the state is not that op's. A denied batch gets none:
// it charged only usage.
func Charges(ops []Op, decisions []Decision, before func(key string) State, writes map[string]State, now time.Time) []KeyCharge {
	if len(writes) == 0 || len(decisions) != len(ops) || VerdictOf(ops, decisions).Denied() {
		return nil
	}
	type acc struct {
		hits  uint64
		last  int // the last non-usage op that charged the key, -1 for none
		usage bool
		// family is that of the last op with a valid limit: the family of
		// the state the key ends with (Take reads another family's as fresh).
		family Family
	}
	byKey := make(map[string]*acc, len(writes))
	var order []string
	for i, op := range ops {
		if op.Mode == NegativeHits {
			continue // a refund is no charge, and leaves a key's order alone
		}
		a := byKey[op.Key]
		if a == nil {
			a = &acc{last: -1}
			byKey[op.Key] = a
			order = append(order, op.Key)
		}
		if op.Limit.Validate() == nil {
			a.family = op.Limit.Algorithm.Family()
		}
		if !opCharged(op, decisions[i]) {
			continue
		}
		if op.Usage {
			a.usage = true
			continue
		}
		// Only hits recorded past a limit can be this large; the Lua take
		// sees them clamped (internal/scripts' maxHits), and the clamp keeps
		// the undos' int64 arithmetic exact (the count floors at 0 anyway).
		a.hits, a.last = satAdd(a.hits, min(op.Hits, maxChargeHits)), i
	}
	var out []KeyCharge
	for _, key := range order {
		a := byKey[key]
		after, written := writes[key]
		if !written || a.usage || a.last < 0 || a.family != ops[a.last].Limit.Algorithm.Family() {
			continue
		}
		if a.family == Log {
			added := addedEntries(ops, key, before(key), now)
			if len(added) == 0 {
				// A log that kept no entry of the batch (a record past a
				// full log, or a later op under another limit that read it
				// as fresh) has nothing to take back.
				continue
			}
			after = State{Log: added, ExpiresAt: after.ExpiresAt}
		}
		out = append(out, KeyCharge{Key: key, Limit: ops[a.last].Limit, Charged: Charged{Hits: a.hits, After: after}})
	}
	return out
}

// addedEntries is the log entries the ops on key added that its final log
// still holds, replaying the batch's first pass (what an admitted batch
// writes) from st, the stored state: an op that reads the log as fresh
// (expired, out of its limit's range, another family) drops what the ops
// before it added, as take.lua's log view drops its pending entries. An op
// adds its entry at now with a Seq above every one there, so an entry at
// now that the op's read of the state did not hold is new.
func addedEntries(ops []Op, key string, st State, now time.Time) []LogEntry {
	us := min(max(now.UnixMicro(), 0), MaxUnixMicro)
	// The batch's refunds came first (TakeAll): they removed entries
	// stored before it, never one it added.
	for _, op := range ops {
		if op.Key == key && op.Mode == NegativeHits {
			_, st, _ = refund(op.Limit, st, op.Hits, now)
		}
	}
	var added []LogEntry
	for _, op := range ops {
		if op.Key != key || op.Mode == NegativeHits {
			continue
		}
		_, read := Take(op.Limit, st, 0, now)
		_, next, _, _ := firstPass(op, st, now)
		var kept []LogEntry
		for _, e := range next.Log {
			if slices.Contains(added, e) || (e.At == us && !slices.Contains(read.Log, e)) {
				kept = append(kept, e)
			}
		}
		added, st = kept, next
	}
	return added
}

// opCharged reports whether op, decided as d in an admitted batch, charged
// its key (firstPass): allowed with hits, or recorded past its limit
// (usage, Shadow and Quota ops; recordPast skips a zero rate of an
// algorithm whose ZeroRate is ZeroRefuses, and an invalid limit).
func opCharged(op Op, d Decision) bool {
	if op.Hits == 0 || op.Mode == NegativeHits {
		return false
	}
	if d.Allowed {
		return true
	}
	if !op.Usage && op.Mode != Shadow && op.Mode != Quota {
		return false
	}
	lim := op.Limit
	return lim.Validate() == nil && lim.recordsAtZero()
}

// maxChargeHits is internal/scripts' maxHits: the most hits of one op the
// Lua take sees, and so reports in a charge.
const maxChargeHits = 4 * MaxCount

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

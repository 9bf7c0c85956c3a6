package algorithms

import "slices"

// KeyCharge is what an admitted batch charged one key, with the key and the
// limit an Undo of it needs (store.Charge has the same fields, so a store
// converts one into the other).
type KeyCharge struct {
	Key   string
	Limit Limit
	Charged
}

// Charges is what an admitted batch of ops charged, computed from TakeAll's
// decisions and writes and the states its load returned (before), exactly
// as take.lua's charge_of reports it in Redis, so that every store gives
// the same charges back: one per key written, in the order the batch first
// names them, where
//
//   - Hits is the sum of the hits of the non-usage ops that charged the key:
//     allowed ones, and Shadow and Quota ops recorded past their limits
//     (a Spare or Enforce op that did not fit charged nothing);
//   - Limit is the last such op's;
//   - After is the state written; for sliding_log only the entries the
//     batch added (what Undo removes), with the log's ExpiresAt.
//
// A key a usage op charged gets no charge: usage is never given back, and
// taking back the other hits could return room a bucket's floor absorbed of
// the usage. A denied batch gets none: it charged only usage.
func Charges(ops []Op, decisions []Decision, before func(key string) State, writes map[string]State) []KeyCharge {
	if len(writes) == 0 || len(decisions) != len(ops) || VerdictOf(ops, decisions).Denied() {
		return nil
	}
	type acc struct {
		hits  uint64
		last  int // the last non-usage op that charged the key, -1 for none
		usage bool
	}
	byKey := make(map[string]*acc, len(writes))
	var order []string
	for i, op := range ops {
		a := byKey[op.Key]
		if a == nil {
			a = &acc{last: -1}
			byKey[op.Key] = a
			order = append(order, op.Key)
		}
		if !opCharged(op, decisions[i]) {
			continue
		}
		if op.Usage {
			a.usage = true
			continue
		}
		// Saturating: only hits recorded past a limit can be this large,
		// and an undo takes back at most what the key holds.
		a.hits, a.last = satAdd(a.hits, op.Hits), i
	}
	var out []KeyCharge
	for _, key := range order {
		a := byKey[key]
		after, written := writes[key]
		if !written || a.usage || a.last < 0 {
			continue
		}
		if len(after.Log) > 0 {
			prev := before(key).Log
			added := State{ExpiresAt: after.ExpiresAt}
			for _, e := range after.Log {
				if !slices.Contains(prev, e) {
					added.Log = append(added.Log, e)
				}
			}
			after = added
		}
		out = append(out, KeyCharge{Key: key, Limit: ops[a.last].Limit, Charged: Charged{Hits: a.hits, After: after}})
	}
	return out
}

// opCharged reports whether op, decided as d in an admitted batch, charged
// its key (firstPass): allowed with hits, or recorded past its limit
// (usage, Shadow and Quota ops; recordPast skips a zero rate but in
// fixed_window, and an invalid limit).
func opCharged(op Op, d Decision) bool {
	if op.Hits == 0 {
		return false
	}
	if d.Allowed {
		return true
	}
	if !op.Usage && op.Mode != Shadow && op.Mode != Quota {
		return false
	}
	lim := op.Limit
	return lim.Validate() == nil && (lim.Requests > 0 || lim.Algorithm == FixedWindow)
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

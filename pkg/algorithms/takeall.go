package algorithms

import "time"

// keyRun is what takeGeneral keeps of one key of its batch: the stored
// state, the running one, whether an op changed it, and what its ops
// applied toward its charge.
type keyRun struct {
	original, pending State
	changed           bool
	acc               chargeAcc
}

// takeGeneral is TakeAll for any ops: a key's later ops see the pending
// state its earlier ops left.
func takeGeneral(ops []Op, load func(key string) State, now time.Time) Batch {
	b, taken := newBatch(len(ops))
	runs := make(map[string]*keyRun, len(ops))
	order := make([]string, 0, len(ops))
	var verdict Verdict
	for i, op := range ops {
		k := runs[op.Key]
		if k == nil {
			st := load(op.Key)
			k = &keyRun{original: st, pending: st, acc: chargeAcc{limit: op.Limit}}
			runs[op.Key] = k
			order = append(order, op.Key)
		}
		before := k.pending
		var ch bool
		b.Decisions[i], k.pending, ch, b.Applied[i], taken[i] = firstPass(op, k.pending, now)
		k.changed = k.changed || ch
		k.acc.add(op, b.Applied[i], before, k.pending, now)
		verdict.Add(op.Mode, op.Joined, b.Decisions[i].Allowed)
	}
	if b.Denied = verdict.Denied(); !b.Denied {
		b.Writes = writesOf(runs, now)
		for _, key := range order {
			k := runs[key]
			usage := func() uint64 { return usageApplied(ops, key, k.original, now) }
			if c, ok := k.acc.charge(key, settle(k.pending, now), usage); ok {
				b.Charges = append(b.Charges, c)
			}
		}
		return b
	}
	// Denied: start again from the stored states, recording usage only
	// (a usage op moves its key's running state on as in the first pass).
	// A usage op the first pass denied keeps that decision, so that the
	// verdict still reads off the decisions: with fewer hits before it its
	// record may now fit, but the request it was denied with is still over.
	for _, k := range runs {
		k.pending, k.changed = k.original, false
	}
	for i, op := range ops {
		k := runs[op.Key]
		b.Applied[i] = 0
		switch {
		case op.Usage:
			var d Decision
			var ch bool
			d, k.pending, ch, b.Applied[i] = record(op.Limit, k.pending, op.Hits, now)
			if b.Decisions[i].Allowed {
				b.Decisions[i] = d
			}
			k.changed = k.changed || ch
		case b.Decisions[i].Allowed:
			b.Decisions[i], _ = Take(op.Limit, k.pending, 0, now)
		default:
			b.Decisions[i] = taken[i]
		}
	}
	b.Writes = writesOf(runs, now)
	return b
}

// writesOf is the states of the changed keys: what a batch writes.
func writesOf(runs map[string]*keyRun, now time.Time) map[string]State {
	var writes map[string]State
	for key, k := range runs {
		if k.changed {
			if writes == nil {
				writes = make(map[string]State, len(runs))
			}
			writes[key] = settle(k.pending, now)
		}
	}
	return writes
}

// takeDistinct is TakeAll for ops on distinct keys, nearly every request:
// each op sees its key's stored state, so no op's pending state needs
// tracking by key. It hands each state to write to save, after every
// load, and with charges reports an admitted batch's (Batch.Charges).
func takeDistinct(ops []Op, load func(key string) State, save func(key string, st State), now time.Time, charges bool) Batch {
	b := Batch{Decisions: make([]Decision, len(ops)), Applied: make([]uint64, len(ops))}
	// A request carries a few descriptors: their scratch stays on the stack.
	var buf [4]distinctPass
	var pass []distinctPass
	if len(ops) > len(buf) {
		pass = make([]distinctPass, len(ops))
	} else {
		pass = buf[:len(ops)]
	}
	var verdict Verdict
	for i, op := range ops {
		p := &pass[i]
		p.original = load(op.Key)
		b.Decisions[i], p.next, p.changed, b.Applied[i], p.taken = firstPass(op, p.original, now)
		verdict.Add(op.Mode, op.Joined, b.Decisions[i].Allowed)
	}
	denied := verdict.Denied()
	b.Denied = denied
	for i, op := range ops {
		p := &pass[i]
		if denied && !op.Usage {
			if b.Decisions[i].Allowed {
				b.Decisions[i], _ = Take(op.Limit, p.original, 0, now)
			} else {
				b.Decisions[i] = p.taken
			}
			b.Applied[i] = 0
			continue
		}
		if p.changed {
			save(op.Key, settle(p.next, now))
		}
		if charges && !denied && !op.Usage && b.Applied[i] > 0 {
			acc := chargeAcc{limit: op.Limit}
			acc.add(op, b.Applied[i], p.original, p.next, now)
			if c, ok := acc.charge(op.Key, settle(p.next, now), nil); ok {
				b.Charges = append(b.Charges, c)
			}
		}
	}
	return b
}

// distinctPass is what takeDistinct's first pass leaves of one op: its
// key's stored state, the state it charged (when changed) and Take's
// decision (firstPass).
type distinctPass struct {
	original, next State
	taken          Decision
	changed        bool
}

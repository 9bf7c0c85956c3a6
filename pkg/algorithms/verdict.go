package algorithms

// Verdict is the all-or-nothing rule of a batch, stated once for Go (the
// Lua driver take.lua is its only other statement): a batch is denied when
// an Enforce op is denied, or when it has Quota ops and every one of them is
// denied. A denied Shadow op, or a denied Quota op beside an allowed one,
// denies nothing. The zero Verdict is an empty, admitted batch; add every op
// with Add, or build it with VerdictOf.
type Verdict struct {
	enforcedDenied     bool
	quotaOps, quotaDen int
}

// VerdictOf is the verdict of ops decided as ds (same length and order).
func VerdictOf(ops []Op, ds []Decision) Verdict {
	var v Verdict
	for i, op := range ops {
		v.Add(op.Mode, ds[i].Allowed)
	}
	return v
}

// Add counts one op of mode m that was allowed or denied.
func (v *Verdict) Add(m Mode, allowed bool) {
	switch m {
	case Shadow:
	case Quota:
		v.quotaOps++
		if !allowed {
			v.quotaDen++
		}
	default:
		v.enforcedDenied = v.enforcedDenied || !allowed
	}
}

// Denied reports whether the batch is denied.
func (v Verdict) Denied() bool {
	return v.enforcedDenied || (v.quotaOps > 0 && v.quotaDen == v.quotaOps)
}

// Hold says how an op holds a denied batch back, which decides how long
// the whole batch must wait (see Verdict.Hold).
type Hold uint8

const (
	// Free: the op does not hold the batch back.
	Free Hold = iota + 1
	// Must: the op must have room before the batch is admitted; the
	// longest wait of these counts.
	Must
	// Either: one of the batch's Quota ops must have room; the shortest
	// wait of these counts.
	Either
)

// Hold says how an op of mode m, allowed or not, holds back a batch of this
// verdict: a denied Enforce op must get room; when every Quota op is denied,
// any one of them getting room would do.
func (v Verdict) Hold(m Mode, allowed bool) Hold {
	switch {
	case allowed || m == Shadow:
		return Free
	case m == Quota:
		if v.quotaDen == v.quotaOps {
			return Either
		}
		return Free
	default:
		return Must
	}
}

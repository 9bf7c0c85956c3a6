package algorithms

// Verdict is the all-or-nothing rule of a batch, stated once for Go (the
// Lua driver take.lua is its only other statement): a batch is denied when
// an Enforce op is denied, or when it has Quota alternatives and every one
// of them is denied. A Quota alternative is a Quota op with the Joined
// Quota ops that follow it (the limits of one descriptor), denied when any
// of its ops is. A denied Shadow or Spare op, a refund (NegativeHits,
// never denied anyway), or a denied alternative beside an allowed one,
// denies nothing.
// The zero Verdict is an empty, admitted batch; add every op in batch order
// with Add (in place: a request's ops need not be copied into []Op).
type Verdict struct {
	enforcedDenied     bool
	quotaOps, quotaDen int
	// inQuota: the last op added was Quota, so a Joined Quota op continues
	// its alternative; altDenied: that alternative is already denied.
	inQuota, altDenied bool
}

// Add counts the next op of the batch: its mode m, whether it is Joined to
// the op before it, and whether it was allowed.
func (v *Verdict) Add(m Mode, joined, allowed bool) {
	if m != Quota {
		v.inQuota = false
		// Shadow, Spare and NegativeHits ops never deny: a Spare op is a lease
		// top-up the request itself did not ask for, a refund gives back.
		if m != Shadow && m != Spare && m != NegativeHits {
			v.enforcedDenied = v.enforcedDenied || !allowed
		}
		return
	}
	if !joined || !v.inQuota {
		v.quotaOps++
		v.altDenied = false
	}
	v.inQuota = true
	if !allowed && !v.altDenied {
		v.altDenied = true
		v.quotaDen++
	}
}

// Denied reports whether the batch is denied.
func (v Verdict) Denied() bool {
	return v.enforcedDenied || v.quotaDenied()
}

// quotaDenied reports whether the batch had Quota alternatives and every
// one was denied. (A caller outside reads it as the Verdict of the same
// ops with every op but Quota ones added as allowed.)
func (v Verdict) quotaDenied() bool {
	return v.quotaOps > 0 && v.quotaDen == v.quotaOps
}

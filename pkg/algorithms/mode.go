package algorithms

// Mode says how an op's denial affects the rest of its batch. Zero means
// Enforce.
type Mode uint8

const (
	// Enforce: a denial denies the whole batch.
	Enforce Mode = iota + 1
	// Shadow: a denial denies nothing; the denied op alone is not charged
	// (envoyproxy's shadow_mode and global SHADOW_MODE).
	Shadow
	// Quota: the batch's quota ops are alternatives; they deny the batch
	// only when every one of them is denied (envoyproxy's quota_mode).
	// Deciding this here rather than sending quota ops as Shadow and
	// flipping the answer afterwards keeps all-or-nothing: a request its
	// quota rules deny charges nothing, where the flip would have charged
	// its other rules (envoyproxy charges every rule either way).
	Quota
	// Spare: hits taken only if they fit, for a lease top-up riding on a
	// request (pkg/store/lease). A Spare op never denies its batch and is
	// never recorded past its limit: an admitted batch charges it when it
	// was allowed, a denied batch never does.
	Spare
	// NegativeHits: Hits given back (Envoy's is_negative_hits), as refund
	// gives them: never below the key's fresh state, never denied. A batch
	// applies these refunds before anything else, whatever their place in
	// it and whatever its verdict, and decides its other ops on the
	// refunded states (see TakeAll). A refund never denies its batch and
	// is never a charge (Batch.Charges, Undo): nothing takes it back.
	NegativeHits
)

// Op is one charge of Hits against Key under Limit.
type Op struct {
	Key   string
	Limit Limit
	Hits  uint64
	Mode  Mode
	// Usage says Hits were already consumed (a token count Envoy reports
	// when a response ends): they are recorded as record does, past the
	// limit too, whatever the batch's verdict. Its decision still says
	// whether the key is within its limit afterwards, and counts in the
	// verdict by Mode.
	Usage bool
	// Joined says the op is one more limit of the descriptor of the op
	// before it (ratelimitd's rate_limits). It matters to Quota ops only:
	// a run of joined Quota ops is one quota alternative, denied when any
	// of its ops is, as a descriptor is over when any of its limits is.
	Joined bool
}

package algorithms

// Info is an algorithm's registry row as plain data: what a store, the
// config loader or the lease layer asks of an algorithm, read off the one
// table that describes it (registry.go). The zero Info is that of an
// unknown algorithm.
type Info struct {
	// Name is its config name (Algorithm.String).
	Name string
	// KeyName is its part of a counter's store key: Name, with a suffix
	// when the stored layout changed (fixed_window.int), so that a store
	// never reads a layout it did not write.
	KeyName string
	// Log: its State is a Log, one entry per admitted request; otherwise
	// it is a view (Window, Bucket, Meter or Arrival). Counter: only the
	// current window's Count matters (fixed_window), so a store may keep
	// one integer per key.
	Log, Counter bool
	// Bucket: a capacity that refills (Limit.Burst applies). Stepped: its
	// refill may step and go into debt (RefillInterval and MaxDebt apply).
	// Calendar: its windows may be calendar months (Limit.Calendar).
	Bucket, Stepped, Calendar bool
	// CountsAtZero: a limit of zero Requests keeps its count as at any
	// limit (fixed_window, as envoyproxy does) rather than refusing every
	// hit and keeping no state.
	CountsAtZero bool
	// WindowLease: replicas may lease hits of the window a block was
	// charged in, and return what they did not use. BucketLease: replicas
	// may lease emission slots reserved ahead of now, which lapse unused.
	// Neither (sliding_log): each entry's time is its admission time, so a
	// hit cannot be admitted after it was charged. lease.Leasable also
	// checks the limit itself (pkg/store/lease).
	WindowLease, BucketLease bool
	// ResetLag is how many periods a window's Decision.ResetAfter runs
	// past the end of the window an admission was counted in: 0 for
	// fixed_window, 1 for sliding_window (the next window still weighs the
	// current one's hits). A leased block of window hits ends that much
	// before ResetAfter does.
	ResetLag int64
}

// Info describes a; the zero Info for an unknown algorithm.
func (a Algorithm) Info() Info {
	s, ok := a.lookup()
	if !ok {
		return Info{}
	}
	key := s.key
	if key == "" {
		key = s.name
	}
	return Info{
		Name: s.name, KeyName: key,
		Log: s.family == familyLog, Counter: s.family == familyCounter,
		Bucket: s.bucket, Stepped: s.stepped, Calendar: s.calendar,
		CountsAtZero: s.zero == zeroCounts,
		WindowLease:  s.lease == windowLease, BucketLease: s.lease == bucketLease,
		ResetLag: s.lag,
	}
}

package store

// Fallback is what a Request answers when the backend cannot decide its
// batch (unreachable, timed out). The zero value leaves the failure to the
// caller.
type Fallback uint8

const (
	// FallbackNone: the batch fails with the backend's error and the caller
	// answers for it (ratelimitd's on_store_error: unavailable).
	FallbackNone Fallback = iota
	// FallbackAllow: the request counts as allowed, without being counted.
	FallbackAllow
	// FallbackDeny: the request counts as denied.
	FallbackDeny
	// FallbackLocal: the request is decided in this process's memory with
	// its share of the limit, and the hits it admits are charged to the
	// backend once it answers again (pkg/store/fallback).
	FallbackLocal
)

// String is the on_store_error value the fallback stands for.
func (f Fallback) String() string {
	switch f {
	case FallbackAllow:
		return "allow"
	case FallbackDeny:
		return "deny"
	case FallbackLocal:
		return "local"
	default:
		return "unavailable"
	}
}

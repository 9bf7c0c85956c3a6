// Package fallback is the store decorator behind on_store_error: local.
// While the backend (Redis) cannot decide a batch holding a
// store.FallbackLocal request, each replica decides it in a memstore of its
// own, with its share of every limit: the limit divided by the replicas it
// last saw through the backend (a Presence), starting from its share of
// what the backend last said was left. A counter decided so stays here
// until the backend has taken the hits admitted here, charged once each
// (a marker makes a resent charge a no-op), and until no replica is still
// deciding locally; a window that ended meanwhile is not charged to the
// next one, and a backend that lost its data gets back what each replica
// saw it count before. Requests without a local fallback pass straight
// through.
package fallback

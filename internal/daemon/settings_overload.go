package daemon

import "time"

// defaultMaxConcurrentRequests bounds what a Redis stall can hold (a
// waiting call costs about 20 KB; the stall bench's 20,000 callers peaked
// at 430 MiB without it, 295 MiB with it) and is never reached otherwise:
// a service holds rate x latency calls, 10,000 at 100,000/s only if Redis
// takes 100 ms.
const defaultMaxConcurrentRequests = 10_000

// overloadSettings bound the decisions in progress (envoyproxy's #1241).
type overloadSettings struct {
	// MaxConcurrentRequests is MAX_CONCURRENT_REQUESTS: past it a call is
	// refused at once with RESOURCE_EXHAUSTED (0: no bound).
	MaxConcurrentRequests int
	// RequestTimeout is REQUEST_TIMEOUT: a decision still waiting for
	// Redis this long after it began is answered UNAVAILABLE (0: none but
	// the caller's deadline and REDIS_TIMEOUT).
	RequestTimeout time.Duration
}

// readOverload reads MAX_CONCURRENT_REQUESTS and REQUEST_TIMEOUT, and
// REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR, which is always in effect here.
func (s *settings) readOverload(env *envReader) {
	s.Overload.MaxConcurrentRequests = env.integer("MAX_CONCURRENT_REQUESTS", defaultMaxConcurrentRequests, 0, 1<<30)
	s.Overload.RequestTimeout = env.duration("REQUEST_TIMEOUT", 0)
	// go-redis closes a pooled connection that answers READONLY (after a
	// failover behind one address it would keep reaching the old master,
	// now a replica), and the call is retried on a new one: envoyproxy's
	// #1191 made that optional; here it cannot be turned off.
	if !env.boolean("REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR", true) {
		s.Warnings = append(s.Warnings, "REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR=false has no effect: "+
			"a connection that answers READONLY is always closed and the call retried on a new one")
	}
}

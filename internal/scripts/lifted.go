package scripts

import "github.com/ratelimitd/ratelimitd/pkg/algorithms"

// WithLiftedRefunds has the Runner call fn, after a take's reply and before
// it returns, with the keys of the refunds that gave room back to a counter
// with none left (codeLifted): the denials a replica's local cache may hold
// of them no longer stand (redisstore publishes them). The refunds are
// applied whatever fn does: it must not fail the take.
func WithLiftedRefunds(fn func(keys []string)) RunnerOption {
	return func(r *Runner) { r.lifted = fn }
}

// liftedRefunds tells r.lifted of the keys whose ops reply codeLifted. Only
// a take with a refund can, and a reply it cannot read is Decode's error.
func (r *Runner) liftedRefunds(reply any, ops []algorithms.Op) {
	if r.lifted == nil || !hasRefund(ops) {
		return
	}
	vals, ok := valuesOf(reply)
	if !ok || vals.n < opFields*len(ops) {
		return
	}
	var keys []string
	for i, op := range ops {
		if code, err := vals.int(opFields * i); err == nil && code == codeLifted {
			keys = append(keys, op.Key)
		}
	}
	if len(keys) > 0 {
		r.lifted(keys)
	}
}

func hasRefund(ops []algorithms.Op) bool {
	for _, op := range ops {
		if op.Mode == algorithms.NegativeHits {
			return true
		}
	}
	return false
}

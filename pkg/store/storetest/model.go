package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// model is the reference every store is checked against: algorithms.TakeAll
// over a plain map. When a store and a hand-written expectation disagree,
// the model tells whether the store or pkg/algorithms (or the table) is off.
type model struct {
	states map[string]algorithms.State
}

func newModel() *model {
	return &model{states: make(map[string]algorithms.State)}
}

func (m *model) take(reqs []store.Request, now time.Time) algorithms.Batch {
	b := m.peek(reqs, now)
	for k, st := range b.Writes {
		m.states[k] = st
	}
	return b
}

// peek is what take decides and does, without keeping its writes.
func (m *model) peek(reqs []store.Request, now time.Time) algorithms.Batch {
	// Cloning the log keeps an algorithm that edits it in place from
	// changing the model's stored state behind TakeAll's back.
	return algorithms.TakeAll(store.Ops(reqs), func(key string) algorithms.State {
		st := m.states[key]
		st.Log = slices.Clone(st.Log)
		return st
	}, now)
}

func fmtDur(d time.Duration) string {
	if d == algorithms.Never {
		return "never"
	}
	return d.String()
}

func fmtDecision(d algorithms.Decision) string {
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	return fmt.Sprintf("{%s remaining=%d reset=%s retry=%s}",
		verdict, d.Remaining, fmtDur(d.ResetAfter), fmtDur(d.RetryAfter))
}

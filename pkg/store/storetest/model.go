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

func (m *model) take(reqs []store.Request, now time.Time) []algorithms.Decision {
	ops := store.Ops(reqs)
	// Cloning the log keeps an algorithm that edits it in place from
	// changing the model's stored state behind TakeAll's back.
	load := func(key string) algorithms.State {
		st := m.states[key]
		st.Log = slices.Clone(st.Log)
		return st
	}
	decisions, writes := algorithms.TakeAll(ops, load, now)
	for k, st := range writes {
		m.states[k] = st
	}
	return decisions
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

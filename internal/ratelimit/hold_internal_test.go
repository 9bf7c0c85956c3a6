package ratelimit

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// TestHoldOf: which ops of a denied request its RetryAfter waits for.
func TestHoldOf(t *testing.T) {
	const (
		E = algorithms.Enforce
		S = algorithms.Shadow
		Q = algorithms.Quota
		P = algorithms.Spare
		R = algorithms.NegativeHits
	)
	type op struct {
		mode    algorithms.Mode
		allowed bool
		joined  bool
	}
	for _, tt := range []struct {
		name  string
		ops   []op
		holds []hold
	}{
		{"enforce denied", []op{{E, false, false}, {E, true, false}}, []hold{must, free}},
		{"zero mode is enforce", []op{{0, false, false}}, []hold{must}},
		{"shadow, spare and refund never hold", []op{{S, false, false}, {P, false, false}, {R, false, false}, {E, false, false}}, []hold{free, free, free, must}},
		{"one quota with room frees the others", []op{{Q, false, false}, {Q, true, false}}, []hold{free, free}},
		{"every quota denied", []op{{Q, false, false}, {Q, false, false}, {S, false, false}}, []hold{either, either, free}},
		{"enforce beside a quota with room", []op{{E, false, false}, {Q, false, false}, {Q, true, false}}, []hold{must, free, free}},
		{"joined quota: the denied limit holds", []op{{Q, true, false}, {Q, false, true}}, []hold{free, either}},
		{"two joined alternatives both denied", []op{{Q, false, false}, {Q, true, true}, {Q, true, false}, {Q, false, true}}, []hold{either, free, free, either}},
		{"enforce and every quota denied", []op{{E, false, false}, {Q, false, false}}, []hold{must, either}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reqs := make([]store.Request, len(tt.ops))
			res := make([]store.Result, len(tt.ops))
			for i, o := range tt.ops {
				reqs[i].Mode, reqs[i].Joined, res[i].Allowed = o.mode, o.joined, o.allowed
			}
			q := quotaDenied(reqs, res)
			for i, o := range tt.ops {
				if h := holdOf(q, o.mode, o.allowed); h != tt.holds[i] {
					t.Errorf("op %d: hold %d, want %d", i, h, tt.holds[i])
				}
			}
		})
	}
}

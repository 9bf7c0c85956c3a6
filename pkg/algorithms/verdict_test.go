package algorithms_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func TestVerdict(t *testing.T) {
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
		name        string
		ops         []op
		denied      bool
		quotaDenied bool
	}{
		{"empty", nil, false, false},
		{"enforce allowed", []op{{E, true, false}}, false, false},
		{"enforce denied", []op{{E, false, false}, {E, true, false}}, true, false},
		{"zero mode is enforce", []op{{0, false, false}}, true, false},
		{"shadow denied denies nothing", []op{{S, false, false}, {E, true, false}}, false, false},
		{"spare denied denies nothing", []op{{P, false, false}, {E, true, false}}, false, false},
		{"spare alone denied denies nothing", []op{{P, false, false}}, false, false},
		{"spare does not rescue a denied enforce", []op{{E, false, false}, {P, true, false}}, true, false},
		{"spare ends a quota alternative like enforce", []op{{Q, false, false}, {P, false, false}, {Q, true, true}}, false, false},
		{"one quota with room", []op{{Q, false, false}, {Q, true, false}}, false, false},
		{"every quota denied", []op{{Q, false, false}, {Q, false, false}, {S, false, false}}, true, true},
		{"enforce and quota", []op{{E, false, false}, {Q, false, false}, {Q, true, false}}, true, false},
		// Joined quota ops are the limits of one descriptor: one alternative,
		// denied when any of its limits is.
		{"joined quota: one limit denies the alternative", []op{{Q, true, false}, {Q, false, true}}, true, true},
		{"joined quota beside an alternative with room", []op{{Q, true, false}, {Q, false, true}, {Q, true, false}}, false, false},
		{"two joined alternatives both denied", []op{{Q, false, false}, {Q, true, true}, {Q, true, false}, {Q, false, true}}, true, true},
		{"a refund alone never denies", []op{{R, true, false}}, false, false},
		{"a refund does not rescue a denied enforce", []op{{R, true, false}, {E, false, false}}, true, false},
		{"a refund ends a quota alternative", []op{{Q, false, false}, {R, true, false}, {Q, true, true}}, false, false},
		{"a refund is no quota alternative", []op{{Q, false, false}, {R, true, false}}, true, true},
		{"joined after a non-quota op starts an alternative", []op{{E, true, false}, {Q, false, true}, {Q, true, false}}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ops := make([]algorithms.Op, len(tt.ops))
			ds := make([]algorithms.Decision, len(tt.ops))
			for i, o := range tt.ops {
				ops[i].Mode, ops[i].Joined, ds[i].Allowed = o.mode, o.joined, o.allowed
			}
			v := algorithms.VerdictOf(ops, ds)
			if v.Denied() != tt.denied {
				t.Errorf("Denied = %v, want %v", v.Denied(), tt.denied)
			}
			if v.QuotaDenied() != tt.quotaDenied {
				t.Errorf("QuotaDenied = %v, want %v", v.QuotaDenied(), tt.quotaDenied)
			}
		})
	}
}

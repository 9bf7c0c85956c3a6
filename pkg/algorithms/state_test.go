package algorithms

import "testing"

// TestRegisterLayout pins each view to the Redis hash fields a, b and c
// that the Lua scripts read (registers.go's table): both directions.
func TestRegisterLayout(t *testing.T) {
	const e = 99
	tests := []struct {
		name    string
		st      State
		a, b, c int64
		back    func(State) State // the view read back from the registers, as a State
	}{
		{"window", Window{Start: 1, Count: 2, Prev: 3}.State(e), 1, 2, 3,
			func(s State) State { return s.Window().State(s.ExpiresAt) }},
		{"bucket", Bucket{Last: 4, Tokens: -5, Frac: 6}.State(e), 4, -5, 6,
			func(s State) State { return s.Bucket().State(s.ExpiresAt) }},
		{"meter", Meter{Last: 7, Level: 8, Frac: 9}.State(e), 7, 8, 9,
			func(s State) State { return s.Meter().State(s.ExpiresAt) }},
		{"arrival", Arrival{TAT: 10, Frac: 11}.State(e), 10, 11, 0,
			func(s State) State { return s.Arrival().State(s.ExpiresAt) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if a, b, c := tt.st.Registers(); a != tt.a || b != tt.b || c != tt.c || tt.st.ExpiresAt != e {
				t.Errorf("registers %d %d %d e %d, want %d %d %d e %d", a, b, c, tt.st.ExpiresAt, tt.a, tt.b, tt.c, e)
			}
			if got := tt.back(FromRegisters(tt.a, tt.b, tt.c, e)); got.regs != tt.st.regs || got.ExpiresAt != e {
				t.Errorf("read back %+v, want %+v", got, tt.st)
			}
		})
	}
}

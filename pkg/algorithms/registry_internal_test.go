package algorithms

import (
	"os"
	"testing"
)

// TestRegistryRowsAreComplete: every row has everything the rest of the
// code derives from it, with a Go file of its own named after it; names
// and key names are unique.
func TestRegistryRowsAreComplete(t *testing.T) {
	names, keys := map[string]bool{}, map[string]bool{}
	for _, a := range All() {
		s, _ := a.lookup()
		if s.name == "" || s.family == 0 || s.used == "" || s.take == nil || s.force == nil ||
			s.undo == nil || s.refund == nil || s.horizon == nil || s.valid == nil || s.canonical == nil {
			t.Errorf("row %d (%q) misses a field: %+v", a, s.name, s)
		}
		if names[s.name] || keys[a.Info().KeyName] {
			t.Errorf("%s: name or key name %q used twice", s.name, a.Info().KeyName)
		}
		names[s.name], keys[a.Info().KeyName] = true, true
		if _, err := os.Stat(s.name + ".go"); err != nil {
			t.Errorf("%s: no %s.go with its take, force, undo, refund, range check and horizon: %v", s.name, s.name, err)
		}
	}
}

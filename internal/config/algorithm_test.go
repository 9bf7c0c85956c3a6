package config

import (
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// TestParseAlgorithm: every algorithm's name, in any case, parses to it;
// anything else is an error naming the algorithms, never a default.
func TestParseAlgorithm(t *testing.T) {
	for _, a := range algorithms.All() {
		for _, name := range []string{a.String(), strings.ToUpper(a.String())} {
			if got, err := parseAlgorithm(name); err != nil || got != a {
				t.Errorf("parseAlgorithm(%q) = %v, %v; want %v", name, got, err, a)
			}
		}
	}
	for _, name := range []string{"", "fixed", "gcra ", "token-bucket"} {
		a, err := parseAlgorithm(name)
		if err == nil || !strings.Contains(err.Error(), "want one of fixed_window, sliding_log") {
			t.Errorf("parseAlgorithm(%q) = %v, %v; want an error naming the algorithms", name, a, err)
		}
	}
}

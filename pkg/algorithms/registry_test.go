package algorithms_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// TestRegistryNames: every algorithm is valid and named by its Info.
func TestRegistryNames(t *testing.T) {
	for _, a := range algorithms.All() {
		if !a.Valid() || a.Info().Name != a.String() || !strings.HasPrefix(a.Info().KeyName, a.String()) {
			t.Errorf("%s: Valid %v, Info %+v", a, a.Valid(), a.Info())
		}
	}
}

// TestUnknownAlgorithmIsNeverDefaulted: a value outside the registry is
// invalid and denied, never run as some other algorithm.
func TestUnknownAlgorithmIsNeverDefaulted(t *testing.T) {
	for _, a := range []algorithms.Algorithm{0, algorithms.Algorithm(len(algorithms.All()) + 1), 255} {
		lim := algorithms.Limit{Algorithm: a, Requests: 10, Period: time.Second}
		if a.Valid() || lim.Validate() == nil || a.Info() != (algorithms.Info{}) {
			t.Errorf("%s: Valid %v, Validate %v, Info %+v", a, a.Valid(), lim.Validate(), a.Info())
		}
		d, _ := algorithms.Take(lim, algorithms.State{}, 1, time.UnixMicro(1e15))
		if d.Allowed || d.RetryAfter != algorithms.Never {
			t.Errorf("%s: Take = %+v, want denied forever", a, d)
		}
	}
}

// TestDocsHaveASectionPerAlgorithm: docs/algorithms.md has one "## name"
// section per algorithm, and a row in its Comparison table, in registry
// order.
func TestDocsHaveASectionPerAlgorithm(t *testing.T) {
	raw, err := os.ReadFile("../../docs/algorithms.md")
	if err != nil {
		t.Fatal(err)
	}
	var sections, rows []string
	for _, m := range regexp.MustCompile(`(?m)^## ([a-z_]+)$`).FindAllStringSubmatch(string(raw), -1) {
		if slices.Contains(algorithms.Names(), m[1]) {
			sections = append(sections, m[1])
		}
	}
	if !slices.Equal(sections, algorithms.Names()) {
		t.Errorf("docs/algorithms.md sections %v, registry %v", sections, algorithms.Names())
	}
	_, comparison, _ := strings.Cut(string(raw), "## Comparison\n")
	comparison, _, _ = strings.Cut(comparison, "\n\n## ")
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)`").FindAllStringSubmatch(comparison, -1) {
		rows = append(rows, m[1])
	}
	if !slices.Equal(rows, algorithms.Names()) {
		t.Errorf("docs/algorithms.md's Comparison has rows %v, the registry %v", rows, algorithms.Names())
	}
}

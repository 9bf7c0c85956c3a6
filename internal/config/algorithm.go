package config

import (
	"fmt"
	"strings"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// parseAlgorithm maps a config name (case-insensitive) to its algorithm.
// An unknown name is an error, never a default.
func parseAlgorithm(name string) (algorithms.Algorithm, error) {
	var names []string
	for _, a := range algorithms.All() {
		if strings.EqualFold(a.String(), name) {
			return a, nil
		}
		names = append(names, a.String())
	}
	return 0, fmt.Errorf("unknown algorithm %q (want one of %s)", name, strings.Join(names, ", "))
}

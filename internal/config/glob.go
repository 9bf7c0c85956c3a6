package config

import "strings"

// glob is a descriptor value with one or more '*', each matching any run of
// characters (possibly empty). No other character is special.
type glob struct {
	parts []string // the pattern split at '*'; at least two
}

func newGlob(pattern string) glob {
	return glob{parts: strings.Split(pattern, "*")}
}

// match needs no backtracking: with '*' the only wildcard, taking each
// middle part at its leftmost occurrence never loses a match.
func (g glob) match(s string) bool {
	first, last := g.parts[0], g.parts[len(g.parts)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	if !strings.HasSuffix(s, last) {
		return false
	}
	s = s[:len(s)-len(last)]
	for _, p := range g.parts[1 : len(g.parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}

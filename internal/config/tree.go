package config

import "strings"

// node is one descriptor of the tree, or a domain's root. Children are
// indexed four ways, in the order child tries them: envoyproxy's three, with
// value_regex between the wildcards and the key alone.
type node struct {
	byValue map[Entry]*node         // key and exact value (value != "")
	byWild  map[string][]wildcard   // key -> value patterns, config order
	byRegex map[string][]regexChild // key -> value_regex, config order
	byKey   map[string]*node        // key alone
	rule    *Rule

	// For building and Dump only.
	statKey  string
	source   string
	path     []level
	children []*node // config order
}

type wildcard struct {
	glob glob
	node *node
}

type regexChild struct {
	re   *valueRegex
	node *node
}

func newNode() *node {
	return &node{byValue: map[Entry]*node{}, byKey: map[string]*node{}}
}

// child finds the next node for one request entry: the exact key_value, else
// the first wildcard of that key that matches (config order), else the first
// value_regex of that key that matches (config order), else the key alone.
// A config value containing '*' is also found by its literal text, as in
// envoyproxy.
//
// Regexes rank after every envoyproxy match so that adding one never takes
// a request from an exact value or a wildcard: it only narrows what the key
// alone (or nothing) would have matched, and a file without value_regex
// matches exactly as in envoyproxy.
func (n *node) child(e Entry) *node {
	if e.Value != "" {
		if c := n.byValue[e]; c != nil {
			return c
		}
	}
	if n.byWild != nil {
		for _, w := range n.byWild[e.Key] {
			if w.glob.match(e.Value) {
				return w.node
			}
		}
	}
	if n.byRegex != nil {
		for _, r := range n.byRegex[e.Key] {
			if r.re.match(e.Value) {
				return r.node
			}
		}
	}
	return n.byKey[e.Key]
}

// lookupRegex finds a sibling with the same key and the same value_regex
// text, for duplicate detection. Two different texts that match the same
// values are not detected (deciding that is too costly for a loader); the
// first in config order wins for them.
func (n *node) lookupRegex(key, pattern string) *node {
	for _, r := range n.byRegex[key] {
		if r.re.pattern == pattern {
			return r.node
		}
	}
	return nil
}

func (n *node) addRegex(key string, re *valueRegex, c *node) {
	n.children = append(n.children, c)
	if n.byRegex == nil {
		n.byRegex = map[string][]regexChild{}
	}
	n.byRegex[key] = append(n.byRegex[key], regexChild{re: re, node: c})
}

// lookup finds a configured sibling by its composite key, for duplicate
// detection; unlike child it never matches wildcards.
func (n *node) lookup(key, value string) *node {
	if value == "" {
		return n.byKey[key]
	}
	return n.byValue[Entry{Key: key, Value: value}]
}

func (n *node) add(key, value string, c *node) {
	n.children = append(n.children, c)
	if value == "" {
		n.byKey[key] = c
		return
	}
	n.byValue[Entry{Key: key, Value: value}] = c
	if strings.Contains(value, "*") {
		if n.byWild == nil {
			n.byWild = map[string][]wildcard{}
		}
		n.byWild[key] = append(n.byWild[key], wildcard{glob: newGlob(value), node: c})
	}
}

package config

import "strings"

// node is one descriptor of the tree, or a domain's root. Children are
// indexed three ways, in the order envoyproxy tries them.
type node struct {
	byValue map[Entry]*node       // key and exact value (value != "")
	byWild  map[string][]wildcard // key -> value patterns, config order
	byKey   map[string]*node      // key alone
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

func newNode() *node {
	return &node{byValue: map[Entry]*node{}, byKey: map[string]*node{}}
}

// child finds the next node for one request entry: the exact key_value, else
// the first wildcard of that key that matches (config order), else the key
// alone. A config value containing '*' is also found by its literal text,
// as in envoyproxy.
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
	return n.byKey[e.Key]
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

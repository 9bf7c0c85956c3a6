package config

// CountRules is how many rules domain configures, unlimited ones included
// and each limit of a rate_limits list counted; 0 for a domain that is not
// configured. `ratelimitd check`
// reports it so an operator sees that every file contributed.
func (c *Config) CountRules(domain string) int {
	if c == nil {
		return 0
	}
	tree := c.domains[domain]
	if tree == nil {
		return 0
	}
	return countRules(tree.root)
}

func countRules(n *node) int {
	count := 0
	if n.rule != nil {
		count += len(n.rule.Limits())
	}
	for _, c := range n.children {
		count += countRules(c)
	}
	return count
}

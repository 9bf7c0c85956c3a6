package config

// MatchBucket finds the rule for a Rate Limit Quota Service bucket: the
// BucketId's map of (key, value) pairs read as a request descriptor of the
// same domain. A map has no order, so the tree gives it one: from the
// domain's root, each level takes the bucket key that starts the first of
// the level's descriptors (in file order) naming a key of the bucket, and
// that entry then picks its node exactly as Match does (exact value,
// wildcard, value_regex, key alone), never backtracking. Every pair must be
// used and the last node must have a rule, as for a descriptor.
//
// It returns the rule and the entries in the order that matched them (what
// KeyBuilder.Key needs to name the counters), or nil when nothing matches.
// A request descriptor with the same entries in that order reaches the same
// rule and counters: RLQS buckets and RLS descriptors share them.
func (c *Config) MatchBucket(domain string, bucket map[string]string) (*Rule, []Entry) {
	if c == nil || len(bucket) == 0 {
		return nil, nil
	}
	tree := c.domains[domain]
	if tree == nil {
		return nil, nil
	}
	n := tree.root
	entries := make([]Entry, 0, len(bucket))
	for len(entries) < len(bucket) {
		e, ok := n.nextBucketEntry(bucket, entries)
		if !ok {
			return nil, nil
		}
		if n = n.child(e); n == nil {
			return nil, nil
		}
		entries = append(entries, e)
	}
	if n.rule == nil {
		return nil, nil
	}
	return n.rule, entries
}

// nextBucketEntry is the bucket's entry whose key the first of n's children
// in file order names, among the keys not used yet.
func (n *node) nextBucketEntry(bucket map[string]string, used []Entry) (Entry, bool) {
	for _, c := range n.children {
		key := c.path[len(c.path)-1].key
		v, ok := bucket[key]
		if ok && !usedKey(used, key) {
			return Entry{Key: key, Value: v}, true
		}
	}
	return Entry{}, false
}

func usedKey(used []Entry, key string) bool {
	for _, e := range used {
		if e.Key == key {
			return true
		}
	}
	return false
}

package config

import "strings"

// LocalFallback reports whether a rule of c has on_store_error: local (its
// own or WithStoreErrorDefault's): whether replicas need to learn of each
// other, to share its limit while Redis is down.
func (c *Config) LocalFallback() bool {
	found := false
	c.EachRule(func(r *Rule) { found = found || r.OnStoreError == StoreErrorLocal })
	return found
}

// PresenceKey is the Redis key of the replicas' presence under b's prefix
// (pkg/store/fallback). Its hash tag, "ratelimitd", has no ':', so it is no
// counter's key (whose tag is domain:len:key...) and starts no domain's
// listing prefix.
func (b KeyBuilder) PresenceKey() string {
	var sb strings.Builder
	writeEscaped(&sb, b.Prefix, false)
	sb.WriteString("{ratelimitd}:replicas")
	return sb.String()
}

// RuleOfKey names the rule of a counter's key, for metrics: its domain and
// its descriptor's stats key, or only the domain when no rule in force
// matches it, and nothing for a key b did not build.
func (c *Config) RuleOfKey(b KeyBuilder, key string) (domain, statKey string) {
	pk, err := b.ParseKey(key)
	if err != nil {
		return "", ""
	}
	if c == nil {
		return pk.Domain, ""
	}
	if r := c.Match(pk.Domain, pk.Entries); r != nil {
		return pk.Domain, r.StatKey
	}
	return pk.Domain, ""
}

package config

// LocalFallback reports whether a rule of c has on_store_error: local (its
// own or WithStoreErrorDefault's): whether replicas need to learn of each
// other, to share its limit while Redis is down.
func (c *Config) LocalFallback() bool {
	found := false
	c.EachRule(func(r *Rule) { found = found || r.OnStoreError == StoreErrorLocal })
	return found
}

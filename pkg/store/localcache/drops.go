package localcache

// recentDrops remembers at which generation keys were invalidated lately,
// in two generations of maps so that it stays bounded: when the newer map
// fills, the older one is forgotten, and floor says below which generation
// invalidations may have been forgotten.
type recentDrops struct {
	cur, prev map[string]uint64
	floor     uint64
}

// maxRecentDrops bounds each map: a backend call outlives a few thousand
// invalidations only under a storm of refunds, and then since answers
// "maybe" (the denial is not cached), never a wrong "no".
const maxRecentDrops = 4096

func (r *recentDrops) add(key string, gen uint64) {
	if len(r.cur) >= maxRecentDrops {
		// prev is forgotten. One Invalidate gives all its keys one
		// generation, so prev may end at cur's first generation: the
		// floor is past prev's last.
		r.forgetBefore(maxGen(r.prev) + 1)
		r.prev, r.cur = r.cur, nil
	}
	if r.cur == nil {
		r.cur = make(map[string]uint64)
	}
	r.cur[key] = gen
}

// forgetBefore forgets the invalidations below generation g: since then
// answers true for any backend call asked before g-1 (one that may have
// been asked before such an invalidation).
func (r *recentDrops) forgetBefore(g uint64) {
	r.floor = max(r.floor, g)
	if g > maxGen(r.prev) {
		r.prev = nil
	}
	if g > maxGen(r.cur) {
		r.cur = nil
	}
}

// since reports whether key may have been invalidated after generation gen
// (when a backend call asked at gen may not show it).
func (r *recentDrops) since(key string, gen uint64) bool {
	if gen+1 < r.floor {
		return true
	}
	if g, ok := r.cur[key]; ok && g > gen {
		return true
	}
	g, ok := r.prev[key]
	return ok && g > gen
}

func maxGen(m map[string]uint64) uint64 {
	var high uint64
	for _, g := range m {
		high = max(high, g)
	}
	return high
}

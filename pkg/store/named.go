package store

// NamedBefore reports whether reqs[i]'s key is named earlier in reqs (a
// decorator answers for a key at its first request). A batch holds a few
// dozen requests at most, so a scan beats a map.
func NamedBefore(reqs []Request, i int) bool {
	for _, prev := range reqs[:i] {
		if prev.Key == reqs[i].Key {
			return true
		}
	}
	return false
}

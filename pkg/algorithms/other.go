package algorithms

// takeOther is replaced as the remaining algorithms land.
func takeOther(lim Limit, st State, hits uint64, now int64) (Decision, State) {
	return fixedWindow(lim, st, hits, now)
}

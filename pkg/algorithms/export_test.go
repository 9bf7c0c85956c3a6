package algorithms

// The registry's lookups that only the package's external tests need.

var Names = names

func (a Algorithm) Valid() bool { return a.valid() }

func (a Algorithm) UsedMeans() string { return a.usedMeans() }

func NamesOf(has func(Algorithm) bool) string { return namesOf(has) }

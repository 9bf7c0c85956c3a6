package testkit

import "os"

// SoakEnv, when set, asks for the long runs: make test-soak sets it, and
// the property tests that run smaller in make test (their Redis runs, where
// each step is a round trip under the race detector) run at full size.
const SoakEnv = "RATELIMITD_SOAK"

// Soak reports whether SoakEnv is set.
func Soak() bool { return os.Getenv(SoakEnv) != "" }

// Size is quick in make test and full under SoakEnv: how large a run the
// slow property tests make.
func Size(quick, full int) int {
	if Soak() {
		return full
	}
	return quick
}

package daemon

import (
	"go/build"
	"slices"
	"testing"
)

// TestBuiltOnPublicService: the daemon decides through pkg/service, so that
// package's claim to decide exactly as the daemon does holds by
// construction. Importing the core it wraps would let the daemon build its
// own service beside it again.
func TestBuiltOnPublicService(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	const (
		public  = "github.com/ratelimitd/ratelimitd/pkg/service"
		wrapped = "github.com/ratelimitd/ratelimitd/internal/ratelimit"
	)
	if !slices.Contains(pkg.Imports, public) {
		t.Errorf("internal/daemon does not import %s", public)
	}
	if slices.Contains(pkg.Imports, wrapped) {
		t.Errorf("internal/daemon imports %s, which %s wraps: build the service with the public package", wrapped, public)
	}
}

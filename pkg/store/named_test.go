package store_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

func TestNamedBefore(t *testing.T) {
	reqs := []store.Request{{Key: "a"}, {Key: "b"}, {Key: "a"}, {Key: "c"}}
	for i, want := range []bool{false, false, true, false} {
		if got := store.NamedBefore(reqs, i); got != want {
			t.Errorf("NamedBefore(%d) = %v, want %v", i, got, want)
		}
	}
}

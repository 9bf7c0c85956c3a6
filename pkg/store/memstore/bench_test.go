package memstore_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

func BenchmarkTake(b *testing.B) {
	s := memstore.New()
	defer s.Close()
	storetest.Bench(b, s)
}

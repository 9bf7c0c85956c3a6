package redisstore_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

func BenchmarkTake(b *testing.B) {
	srv := redistest.Start(b)
	s, err := redisstore.New(redisstore.WithAddr(srv.Addr))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.Bench(b, s)
}

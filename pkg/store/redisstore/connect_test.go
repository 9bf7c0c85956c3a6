package redisstore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

func TestAuth(t *testing.T) {
	srv := redistest.Start(t,
		"--requirepass", "default-pw",
		"--user", "alice", "on", ">alice-pw", "~*", "&*", "+@all")
	cases := []struct {
		name string
		auth string
		ok   bool
	}{
		{name: "password", auth: "default-pw", ok: true},
		{name: "user:password", auth: "alice:alice-pw", ok: true},
		{name: "default user explicitly", auth: "default:default-pw", ok: true},
		{name: "no auth", auth: "", ok: false},
		{name: "wrong password", auth: "nope", ok: false},
		{name: "wrong user password", auth: "alice:default-pw", ok: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithAuth(tc.auth), redisstore.WithTimeout(2*time.Second))
			res, err := s.Take(t.Context(), batch(2, window(5), 1))
			if tc.ok && (err != nil || !res[0].Allowed) {
				t.Fatalf("Take = %v, %v; want allowed", res, err)
			}
			if !tc.ok && (err == nil || res != nil) {
				t.Fatalf("Take = %v, %v; want an auth error", res, err)
			}
			if err := s.Ping(t.Context()); (err == nil) != tc.ok {
				t.Errorf("Ping = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	redistest.Start(t, "--unixsocket", sock, "--unixsocketperm", "700")
	for name, opts := range map[string][]redisstore.Option{
		"socket type": {redisstore.WithSocketType("unix"), redisstore.WithAddr(sock)},
		"unix url":    {redisstore.WithAddr("unix://" + sock)},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, opts...)
			res := mustTake(t, s, batch(1, window(5), 2))
			if !res[0].Allowed {
				t.Fatalf("Take over a unix socket: %+v", res[0].Decision)
			}
		})
	}
}

package main

import (
	"net"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A paced load never starts more calls than its schedule allows (rate x
// duration), where an unpaced one is held by no schedule. The paced rate is
// low enough that any machine answers faster (under load 11 an unpaced
// run made 83 calls in 0.5 s, fewer than a 200/s schedule's 100), and the
// calls' deadline generous: the test counts calls, it does not time them.
func TestLoadRate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, floorServer{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	reqs := requests("d", "k", 1, 16)
	conns := []*grpc.ClientConn{conn}

	const rate, d, deadline = 20, 500 * time.Millisecond, 30 * time.Second
	scheduled := rate * int(d/time.Millisecond) / 1000
	paced := load(conns, reqs, 8, d, deadline, rate)
	if paced.failed != 0 || paced.calls == 0 || paced.calls > scheduled {
		t.Errorf("paced at %d/s for %s: %d calls (%d failed), want 1..%d", rate, d, paced.calls, paced.failed, scheduled)
	}
	free := load(conns, reqs, 8, d, deadline, 0)
	t.Logf("%s paced at %d/s: %d calls; unpaced: %d calls", d, rate, paced.calls, free.calls)
	if free.failed != 0 || free.calls <= scheduled {
		t.Errorf("unpaced for %s: %d calls (%d failed), want more than the %d a %d/s schedule allows", d, free.calls, free.failed, scheduled, rate)
	}
}

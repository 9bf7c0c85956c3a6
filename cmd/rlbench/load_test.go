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
// duration), where an unpaced one runs as fast as the floor answers.
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

	const rate, d = 200, 500 * time.Millisecond
	paced := load(conns, reqs, 8, d, time.Second, rate)
	if paced.failed != 0 || paced.calls == 0 || paced.calls > rate*int(d/time.Millisecond)/1000 {
		t.Errorf("paced at %d/s for %s: %d calls (%d failed), want 1..%d", rate, d, paced.calls, paced.failed, rate/2)
	}
	free := load(conns, reqs, 8, d, time.Second, 0)
	if free.failed != 0 || free.calls <= paced.calls {
		t.Errorf("unpaced: %d calls (%d failed), paced %d", free.calls, free.failed, paced.calls)
	}
}

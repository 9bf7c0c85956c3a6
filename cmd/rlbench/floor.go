package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// floorServer answers every ShouldRateLimit with OK and does nothing else:
// the cost of gRPC itself, which no rate limiter can go below.
type floorServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

var okResponse = &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}

func (floorServer) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return okResponse, nil
}

// serveFloor runs the floor server in this process (rlbench re-executes
// itself with -serve-floor so the floor has its own /proc/PID/stat). It
// prints the address it listens on, then serves until SIGTERM.
func serveFloor(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, floorServer{})
	return serveUntilSignal(srv, ln)
}

// serveUntilSignal prints the address (the parent reads it: startSelf) and
// serves until SIGTERM or an interrupt.
func serveUntilSignal(srv *grpc.Server, ln net.Listener) error {
	fmt.Println(ln.Addr().String())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		srv.Stop()
	}()
	return srv.Serve(ln)
}

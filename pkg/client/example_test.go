package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// startRatelimitd stands for a ratelimitd on its gRPC port; it returns the
// address and a stop function.
func startRatelimitd() (string, func()) {
	rules, err := service.ParseRules(service.RulesFile{Name: "jobs.yaml", YAML: []byte(`
domain: jobs
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 2}
`)})
	if err != nil {
		log.Fatal(err)
	}
	st := memstore.New()
	svc, err := service.New(rules, st)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(svc.GRPCServerOptions()...)
	svc.RegisterGRPC(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { srv.Stop(); st.Close() }
}

// Limiting work that is not a request the program serves (here a job per
// tenant) with a remote ratelimitd: one connection, a deadline per
// decision, and fail open if ratelimitd cannot answer.
func ExampleDial() {
	addr, stop := startRatelimitd()
	defer stop()

	rl, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer rl.Close()
	limiter := client.NewLimiter(rl, client.WithTimeout(time.Second), client.WithOnError(client.OnErrorAllow))

	for range 3 {
		d := limiter.Check(context.Background(), "jobs", 0, client.Descriptor{{Key: "tenant", Value: "acme"}})
		if d.Err != nil {
			log.Print("rate limit unavailable, running anyway: ", d.Err)
		}
		fmt.Println(d.Verdict)
	}
	// Output:
	// admitted
	// admitted
	// denied
}

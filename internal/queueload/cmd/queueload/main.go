// Command queueload runs one queueload.Load against ratelimitd replicas and
// prints its Summary as JSON. test/integration builds it without the race
// detector so that an instrumented client does not dominate the figures.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
	"github.com/ratelimitd/ratelimitd/internal/queueload"
)

func main() {
	var l queueload.Load
	addrs := flag.String("addrs", "", "comma-separated gRPC addresses of the replicas")
	flag.StringVar(&l.Queue, "queue", "load", "queue name")
	flag.IntVar(&l.Messages, "messages", 10000, "messages to enqueue")
	flag.IntVar(&l.Producers, "producers", 16, "concurrent producers")
	flag.IntVar(&l.Rate, "rate", 0, "enqueues per second (0: unpaced)")
	flag.IntVar(&l.Consumers, "consumers", 20, "long-polling consumers")
	flag.DurationVar(&l.MaxDelay, "max-delay", 2e9, "delays are random in [0, max-delay)")
	flag.DurationVar(&l.Visibility, "visibility", 10e9, "visibility timeout of each claim")
	flag.DurationVar(&l.Wait, "wait", 2e9, "long-poll wait")
	flag.DurationVar(&l.Max, "max", 30e9, "how long to wait for every message to be acked")
	flag.Parse()
	var clients []queuev1.DelayQueueClient
	for _, a := range strings.Split(*addrs, ",") {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer conn.Close()
		clients = append(clients, queuev1.NewDelayQueueClient(conn))
	}
	s := queueload.Run(context.Background(), clients, l)
	if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

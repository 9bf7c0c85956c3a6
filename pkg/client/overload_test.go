package client_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// TestLimiterOverloaded: a service past its MAX_CONCURRENT_REQUESTS answers
// RESOURCE_EXHAUSTED like a request over its size cap, but it is a service
// that cannot decide, not a malformed request: OnError decides it.
func TestLimiterOverloaded(t *testing.T) {
	srv := redistest.StartProcess(t)
	st, err := redisstore.New(redisstore.WithAddr(srv.Addr), redisstore.WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	svc, err := service.New(rules(t), st, service.WithAdmission(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	remote, _ := remoteOf(t, svc)
	alice := client.Descriptor{{Key: "user", Value: "alice"}}
	if d := client.NewLimiter(remote, client.WithTimeout(10*time.Second)).Check(t.Context(), "api", 0, alice); d.Verdict != client.Admitted {
		t.Fatalf("before the stall: %v %v", d.Verdict, d.Err)
	}
	thaw := srv.Freeze(t)
	stuck := make(chan client.Decision, 1)
	go func() {
		stuck <- client.NewLimiter(remote, client.WithTimeout(time.Minute)).Check(t.Context(), "api", 0, alice)
	}()
	testkit.WaitFor(t, 10*time.Second, "the stalled call to hold the only slot", func() bool {
		inFlight, _, _ := svc.Admission()
		return inFlight == 1
	})
	for _, m := range []struct {
		onError client.OnError
		want    client.Verdict
	}{{client.OnErrorAllow, client.Admitted}, {client.OnErrorDeny, client.Denied}, {client.OnErrorUnavailable, client.Failed}} {
		d := client.NewLimiter(remote, client.WithTimeout(10*time.Second), client.WithOnError(m.onError)).Check(t.Context(), "api", 0, alice)
		if d.Verdict != m.want || status.Code(d.Err) != codes.ResourceExhausted {
			t.Errorf("OnError %d: %v %v, want %v with RESOURCE_EXHAUSTED", m.onError, d.Verdict, d.Err, m.want)
		}
	}
	thaw()
	if d := <-stuck; d.Verdict != client.Admitted {
		t.Errorf("the stalled call once Redis answered: %v %v", d.Verdict, d.Err)
	}
}

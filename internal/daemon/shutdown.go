package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// shutdown stops serving within the shutdown timeout, in the order that
// loses nothing: health says NOT_SERVING first, then the queue's long polls
// and the quota streams end, every server drains, the watcher stops
// (watchDone is nil once it has ended), the leases give their unused hits
// back while Redis is still open, and the store, the tracer, the stats and
// the queue's client close. It returns runErr joined with what failed on
// the way.
func (a *app) shutdown(runErr error, watchDone <-chan error) error {
	a.log.Info("shutting down", zap.Duration("timeout", a.set.ShutdownTimeout))
	deadline := time.Now().Add(a.set.ShutdownTimeout)
	a.svc.SetServing(false)
	a.health.Shutdown()
	a.queue.shutdown()
	a.stopRLQS()
	a.shutdownServers(deadline)
	a.stopWatch()
	if watchDone != nil {
		<-watchDone
	}
	// Every call has ended: give the leases' unused hits back within what
	// is left of the shutdown timeout.
	a.returnLeases(deadline)
	if err := a.store.Close(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("closing store: %w", err))
	}
	if err := a.stopTracing(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	// Every call has ended: send the stats they left.
	a.envoy.close()
	return errors.Join(runErr, a.queue.close())
}

// shutdownServers stops every server in parallel, letting in-flight
// calls finish until the shutdown's deadline, then cutting them off.
func (a *app) shutdownServers(deadline time.Time) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		done := make(chan struct{})
		go func() {
			a.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			a.grpc.Stop()
			<-done
		}
	})
	for _, srv := range []*http.Server{a.http, a.debug, a.prom} {
		if srv == nil {
			continue
		}
		wg.Go(func() {
			if err := srv.Shutdown(ctx); err != nil {
				_ = srv.Close()
			}
		})
	}
	wg.Wait()
}

func serveErr(name string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return fmt.Errorf("%s server: %w", name, err)
}

// abort releases what newApp and a failed listen acquired.
func (a *app) abort(cause error) error {
	if a.watchDone != nil {
		a.stopWatch()
		<-a.watchDone
	}
	for _, ln := range []net.Listener{a.grpcLn, a.httpLn, a.debugLn, a.promLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
	if err := errors.Join(a.queue.close(), a.store.Close()); err != nil {
		cause = errors.Join(cause, fmt.Errorf("closing store: %w", err))
	}
	if err := a.stopTracing(); err != nil {
		cause = errors.Join(cause, err)
	}
	a.envoy.close()
	return cause
}

// release frees what newApp built when a later step failed: the delay
// queue's client, the store's, and the tracer's exporter.
func (a *app) release() error {
	var errs []error
	if a.queue != nil {
		errs = append(errs, a.queue.close())
	}
	if a.store != nil {
		errs = append(errs, a.store.Close())
	}
	a.envoy.close()
	return errors.Join(append(errs, a.stopTracing())...)
}

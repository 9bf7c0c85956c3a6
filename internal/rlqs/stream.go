package rlqs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// stream is one Envoy's StreamRateLimitQuotas: its buckets, and the timer
// that wakes it when a window of theirs is about to end or has turned.
type stream struct {
	srv     *Server
	ss      grpc.ServerStream
	domain  string
	cfg     *config.Config
	gen     atomic.Uint64 // the generation of cfg (Server.behind reads it)
	buckets map[string]*bucket
	held    int64 // this stream's part of stats.outstanding

	wake    chan struct{}
	timer   Timer
	timerAt time.Time
}

// received is one message of the receiving goroutine.
type received struct {
	r   *report
	at  time.Time
	err error
}

// serve runs one stream until Envoy closes it, a report is refused, the
// server shuts down or the connection ends. A panic ends the stream with
// INTERNAL, never the process.
func (s *Server) serve(ss grpc.ServerStream) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.set.log.Error("rlqs: stream handler panicked", zap.Any("panic", p), zap.Stack("stack"))
			err = status.Error(codes.Internal, "rlqs: internal error")
		}
	}()
	s.stats.streams.Add(1)
	st := &stream{srv: s, ss: ss, buckets: map[string]*bucket{}, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	st.gen.Store(s.gen)
	s.open[st] = struct{}{}
	s.mu.Unlock()
	defer st.close()
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	in := make(chan received)
	go st.receive(ctx, in)
	return st.loop(ctx, in)
}

// receive reads reports until the stream fails, stamping each with its
// arrival time. A panic decoding one ends the stream, not the process.
func (st *stream) receive(ctx context.Context, in chan<- received) {
	for {
		r := &report{caps: st.srv.caps}
		err := st.recv(r)
		m := received{r: r, at: st.srv.now(), err: err}
		if err == nil {
			st.srv.stats.pending.Add(1)
		}
		select {
		case in <- m:
		case <-ctx.Done():
			if err == nil {
				st.srv.stats.pending.Add(-1)
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// recv is RecvMsg, a panic in it an INTERNAL error.
func (st *stream) recv(r *report) (err error) {
	defer func() {
		if p := recover(); p != nil {
			st.srv.set.log.Error("rlqs: receiving a report panicked", zap.Any("panic", p), zap.Stack("stack"))
			err = status.Error(codes.Internal, "rlqs: internal error")
		}
	}()
	return st.ss.RecvMsg(r)
}

func (st *stream) loop(ctx context.Context, in <-chan received) error {
	srv := st.srv
	for {
		// A reload (seen by the poll, or by whatever read the rules
		// first) is handled before anything else.
		cfg, gen, changed := srv.config()
		if cfg != st.cfg || gen != st.gen.Load() {
			if err := st.onReload(); err != nil {
				return err
			}
		}
		select {
		case m := <-in:
			if errors.Is(m.err, io.EOF) {
				// Envoy closed its side: everything it sent is answered.
				return nil
			}
			if err := st.onMessage(m); err != nil {
				return err
			}
		case <-st.wake:
			err := st.onTimer()
			srv.stats.pending.Add(-1)
			if err != nil {
				return err
			}
		case <-changed:
			continue
		case <-srv.done:
			return status.Error(codes.Unavailable, "rlqs: server shutting down; reconnect to another replica")
		case <-ctx.Done():
			return ctx.Err()
		}
		st.track()
		st.schedule()
	}
}

// onMessage handles one received report, or the stream's error.
func (st *stream) onMessage(m received) error {
	if m.err != nil {
		return m.err
	}
	defer st.srv.stats.pending.Add(-1)
	if m.r.err != nil {
		st.srv.stats.rejected.Add(1)
		return m.r.err
	}
	if err := st.onReport(m.r, m.at); err != nil {
		st.srv.stats.rejected.Add(1)
		return err
	}
	st.srv.stats.reports.Add(1)
	return nil
}

// close gives up the stream's buckets. Their grants stay charged: Envoy
// may use them until their TTLs run out.
func (st *stream) close() {
	st.srv.mu.Lock()
	delete(st.srv.open, st)
	st.srv.mu.Unlock()
	if st.timer != nil {
		st.timer.Stop()
		st.srv.stats.pending.Add(-int64(len(st.wake)))
	}
	st.srv.stats.streams.Add(-1)
	st.srv.stats.buckets.Add(-int64(len(st.buckets)))
	st.srv.stats.outstanding.Add(-st.held)
}

// track keeps stats.outstanding at the hits the stream's current windows
// charged that Envoy has not reported used.
func (st *stream) track() {
	now := st.srv.now()
	var held int64
	for _, b := range st.buckets {
		w := b.win
		if w.charged > w.allowed && now.Before(w.end) {
			held += int64(w.charged - w.allowed)
		}
	}
	st.srv.stats.outstanding.Add(held - st.held)
	st.held = held
}

// maxActions bounds the actions of one response: a response is built
// whole in memory (the actions of a thousand buckets take about a MB).
const maxActions = 1000

// send sends actions in responses of at most maxActions.
func (st *stream) send(actions []*rlqsv3.RateLimitQuotaResponse_BucketAction) error {
	for len(actions) > 0 {
		n := min(len(actions), maxActions)
		if err := st.ss.SendMsg(&rlqsv3.RateLimitQuotaResponse{BucketAction: actions[:n]}); err != nil {
			return fmt.Errorf("rlqs: send: %w", err)
		}
		st.srv.stats.responses.Add(1)
		actions = actions[n:]
	}
	return nil
}

package xdsconfig

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/zap"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// Source keeps the config last ACKed from an xDS server. It satisfies the
// service's ConfigSource (Current) and the app's watcher (Run, Reload).
type Source struct {
	target  string
	opts    options
	conn    *grpc.ClientConn
	node    *corev3.Node
	current atomic.Pointer[config.Config]
	ready   chan struct{}
	once    sync.Once

	// version is the last ACKed version_info; rejected is the last NACKed
	// version and its error. Only Run's goroutine uses them.
	version  string
	rejected rejection
}

type rejection struct{ version, err string }

// New prepares a subscription to target (host:port, or any gRPC target);
// nothing is dialled until Run.
func New(target string, opts ...Option) (*Source, error) {
	o := options{nodeID: "default", backoff: DefaultBackoff, log: zap.NewNop()}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.backoff.Initial <= 0 || o.backoff.Max < o.backoff.Initial {
		return nil, fmt.Errorf("xds: backoff: want 0 < initial (%s) <= max (%s)", o.backoff.Initial, o.backoff.Max)
	}
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	// Keepalive finds a server that vanished without closing the stream
	// (a partition, a node lost): without it Recv would wait forever. Five
	// minutes is the most often a default gRPC server lets a client ping.
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Minute, Timeout: 20 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("xds: server %q: %w", target, err)
	}
	node := &corev3.Node{
		Id:                   o.nodeID,
		Metadata:             o.metadata,
		UserAgentName:        "ratelimitd",
		UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: o.agent},
	}
	return &Source{target: target, opts: o, conn: conn, node: node, ready: make(chan struct{})}, nil
}

// Current is the config in force: nil until the first response is ACKed.
func (s *Source) Current() *config.Config { return s.current.Load() }

// Ready is closed once a config has been ACKed.
func (s *Source) Ready() <-chan struct{} { return s.ready }

// Reload has nothing to do: the server pushes every change. SIGHUP lands
// here; it is logged so that an operator expecting a reread learns why not.
func (s *Source) Reload() error {
	s.opts.log.Info("SIGHUP ignored: the xDS server pushes config changes", zap.String("server", s.target))
	return nil
}

// Run subscribes until ctx ends, reconnecting with backoff whenever the
// stream fails. It closes the connection when it returns; call it once.
func (s *Source) Run(ctx context.Context) error {
	defer s.conn.Close()
	attempt := 0
	for {
		received, err := s.stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if received {
			attempt = 0
		}
		delay := s.opts.backoff.delay(attempt, rand.Float64)
		attempt++
		s.opts.log.Warn("xDS stream failed; reconnecting",
			zap.String("server", s.target), zap.Error(err), zap.Duration("in", delay),
			zap.Bool("config_loaded", s.Current() != nil))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// stream runs one ADS stream; received says whether the server answered
// at all, which resets the backoff.
func (s *Source) stream(ctx context.Context) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(s.opts.headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(s.opts.headers))
	}
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(s.conn).StreamAggregatedResources(ctx)
	if err != nil {
		return false, err
	}
	// Resubscribing with the last ACKed version tells the server what we
	// hold, so an unchanged snapshot is not resent.
	if err := st.Send(s.request("", nil)); err != nil {
		return false, sendErr(st, err)
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return received, err
		}
		if !received {
			s.opts.log.Info("xDS stream established", zap.String("server", s.target), zap.String("node", s.node.GetId()))
		}
		received = true
		req := s.apply(resp)
		if req.GetErrorDetail() != nil && !s.pace(ctx) {
			return received, ctx.Err()
		}
		if err := st.Send(req); err != nil {
			return received, sendErr(st, err)
		}
	}
}

// sendErr replaces Send's io.EOF with the status the stream ended with.
func sendErr(st grpc.ClientStream, err error) error {
	if err == nil {
		return nil
	}
	if rerr := st.RecvMsg(new(discoveryv3.DiscoveryResponse)); rerr != nil {
		return rerr
	}
	return err
}

// apply loads resp and answers it: an ACK naming its version, or a NACK
// keeping the last ACKed one with the errors as detail.
func (s *Source) apply(resp *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest {
	var (
		cfg *config.Config
		err error
	)
	if resp.GetTypeUrl() != TypeURL {
		err = fmt.Errorf("response of type %q, subscribed to %q only", resp.GetTypeUrl(), TypeURL)
	} else {
		cfg, err = Parse(resp.GetResources(), s.opts.load...)
	}
	if err != nil {
		// A snapshot cache answers a NACK by resending what it holds, so the
		// same rejection repeats until the control plane changes: log it
		// and count it once.
		rej := rejection{version: resp.GetVersionInfo(), err: err.Error()}
		if rej != s.rejected {
			s.rejected = rej
			s.opts.log.Error("xDS config rejected (NACK); keeping the previous config",
				zap.String("version", rej.version), zap.Error(err))
			if s.opts.onUpdate != nil {
				s.opts.onUpdate(nil, err)
			}
		}
		return s.request(resp.GetNonce(), &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: err.Error()})
	}
	s.current.Store(cfg)
	s.version = resp.GetVersionInfo()
	s.rejected = rejection{}
	s.once.Do(func() { close(s.ready) })
	s.opts.log.Info("xDS config loaded (ACK)", zap.String("version", s.version), zap.Strings("domains", cfg.Domains()))
	if s.opts.onUpdate != nil {
		s.opts.onUpdate(cfg, nil)
	}
	return s.request(resp.GetNonce(), nil)
}

func (s *Source) request(nonce string, detail *rpcstatus.Status) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{
		Node:          s.node,
		TypeUrl:       TypeURL,
		VersionInfo:   s.version,
		ResponseNonce: nonce,
		ErrorDetail:   detail,
	}
}

// pace spaces NACKs: the server resends a rejected snapshot as soon as it
// is NACKed, and without a pause the two would loop as fast as the network
// allows. A fix pushed meanwhile is answered after the pause. It reports
// false when ctx ended first.
func (s *Source) pace(ctx context.Context) bool {
	t := time.NewTimer(min(s.opts.backoff.Initial, maxNackPause))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// maxNackPause bounds how late a fix following a rejected update lands.
const maxNackPause = time.Second

// delay is the wait before reconnect attempt n (from 0).
func (b Backoff) delay(n int, random func() float64) time.Duration {
	d := b.Initial
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter && b.RandomFactor > 0 {
		spread := b.RandomFactor * float64(d)
		d = time.Duration(float64(d) - spread + random()*2*spread)
	}
	return d
}

// errNoConfig is what WaitReady reports when ctx ends first.
var errNoConfig = errors.New("xds: no config received")

// WaitReady blocks until a config is ACKed or ctx ends (the start without
// FORCE_START_WITHOUT_INITIAL_CONFIG).
func (s *Source) WaitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w from %s: %w", errNoConfig, s.target, context.Cause(ctx))
	}
}

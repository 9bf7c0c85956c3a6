package xdsconfig

import (
	"crypto/tls"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// Backoff spaces reconnections after the stream fails: the delay starts at
// Initial, doubles per failed attempt up to Max, and with Jitter is spread
// by ±RandomFactor. A stream that delivered a response resets it.
type Backoff struct {
	Initial      time.Duration
	Max          time.Duration
	RandomFactor float64
	Jitter       bool
}

// DefaultBackoff is envoyproxy's XDS_CLIENT_BACKOFF_* defaults.
var DefaultBackoff = Backoff{Initial: 10 * time.Second, Max: 60 * time.Second, RandomFactor: 0.5, Jitter: true}

// Option configures New.
type Option func(*options)

type options struct {
	nodeID   string
	metadata *structpb.Struct
	headers  map[string]string
	tls      *tls.Config
	load     []config.Option
	backoff  Backoff
	log      *zap.Logger
	onUpdate func(*config.Config, error)
	agent    string
}

// WithNodeID is CONFIG_GRPC_XDS_NODE_ID: the control plane keys its
// snapshots by it.
func WithNodeID(id string) Option { return func(o *options) { o.nodeID = id } }

// WithNodeMetadata is CONFIG_GRPC_XDS_NODE_METADATA.
func WithNodeMetadata(md *structpb.Struct) Option { return func(o *options) { o.metadata = md } }

// WithHeaders adds gRPC metadata to the stream
// (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS).
func WithHeaders(h map[string]string) Option { return func(o *options) { o.headers = h } }

// WithTLS connects to the server over TLS (CONFIG_GRPC_XDS_SERVER_USE_TLS);
// nil, the default, is plaintext.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithLoadOptions passes options to every load (MERGE_DOMAIN_CONFIG).
func WithLoadOptions(opts ...config.Option) Option {
	return func(o *options) { o.load = append(o.load, opts...) }
}

// WithBackoff replaces DefaultBackoff.
func WithBackoff(b Backoff) Option { return func(o *options) { o.backoff = b } }

// WithLogger logs connections, updates and rejections; the default is silent.
func WithLogger(log *zap.Logger) Option {
	return func(o *options) {
		if log != nil {
			o.log = log
		}
	}
}

// WithOnUpdate is called after every response: with the new config and nil
// (ACKed), or with nil and the error (NACKed, the previous config stays).
func WithOnUpdate(fn func(*config.Config, error)) Option {
	return func(o *options) { o.onUpdate = fn }
}

// WithUserAgent sets the node's user agent version (the binary's version).
func WithUserAgent(version string) Option { return func(o *options) { o.agent = version } }

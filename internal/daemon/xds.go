package daemon

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/xdsconfig"
)

// newXDSSource builds the CONFIG_TYPE=GRPC_XDS_SOTW source; nothing is
// dialled until it runs.
func newXDSSource(set settings, log *zap.Logger, onUpdate func(*config.Config, error)) (*xdsconfig.Source, error) {
	x := set.XDS
	opts := []xdsconfig.Option{
		xdsconfig.WithNodeID(x.NodeID),
		xdsconfig.WithHeaders(x.Headers),
		xdsconfig.WithBackoff(x.Backoff),
		xdsconfig.WithLogger(log),
		xdsconfig.WithOnUpdate(onUpdate),
		xdsconfig.WithUserAgent(set.Version),
		xdsconfig.WithLoadOptions(set.rulesOptions()...),
	}
	if len(x.NodeMetadata) > 0 {
		fields := make(map[string]any, len(x.NodeMetadata))
		for k, v := range x.NodeMetadata {
			fields[k] = v
		}
		md, err := structpb.NewStruct(fields)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_NODE_METADATA: %w", err)
		}
		opts = append(opts, xdsconfig.WithNodeMetadata(md))
	}
	if x.UseTLS {
		cfg, err := xdsconfig.ClientTLS(x.TLS, x.ServerURL, func(err error) {
			log.Warn("rotated CONFIG_GRPC_XDS_CLIENT_TLS_CERT/KEY not loaded; presenting the previous one", zap.Error(err))
		})
		if err != nil {
			return nil, err
		}
		opts = append(opts, xdsconfig.WithTLS(cfg))
	}
	return xdsconfig.New(x.ServerURL, opts...)
}

// awaitConfig holds the start until the xDS server sent a config, as
// envoyproxy does unless FORCE_START_WITHOUT_INITIAL_CONFIG is set; with it
// the service starts unready and becomes ready on the first ACK.
func (a *app) awaitConfig(ctx context.Context) error {
	src, ok := a.watcher.(*xdsconfig.Source)
	if !ok || a.set.ForceStartWithoutConfig {
		return nil
	}
	a.startWatch()
	a.log.Warn("waiting for the first rate limit config from the xDS server (FORCE_START_WITHOUT_INITIAL_CONFIG=true starts without it)",
		zap.String("server", a.set.XDS.ServerURL), zap.String("node", a.set.XDS.NodeID))
	return src.WaitReady(ctx)
}

// configDescription says where the rules come from, for the start line.
func (a *app) configDescription() string {
	if a.set.XDS.Enabled {
		return "xds " + a.set.XDS.ServerURL + " node " + a.set.XDS.NodeID
	}
	return a.set.ConfigDir
}

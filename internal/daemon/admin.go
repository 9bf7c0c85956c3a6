package daemon

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/admin"
	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// startAdmin serves the counters API on the gRPC server when an admin
// credential is configured; without one it is not registered at all (and
// reflection does not list it).
func (a *app) startAdmin(m *metrics.Metrics) error {
	auth := admin.NewAuth(a.set.Admin.Token, a.set.Admin.ClientSANs)
	if !auth.Enabled() {
		return nil
	}
	backend, ok := a.store.(store.Admin)
	if !ok {
		return fmt.Errorf("counters API: the %T store cannot reset or list counters", a.store)
	}
	srv := admin.New(a.svc, backend, auth,
		admin.WithKeyBuilder(config.KeyBuilder{Prefix: a.set.CacheKeyPrefix}),
		admin.WithLogger(a.log.Named("admin")),
	)
	if err := srv.Register(m.Registry()); err != nil {
		return err
	}
	srv.RegisterGRPC(a.grpc)
	a.admin = srv
	a.log.Info("counters API enabled", zap.Bool("token", auth.HasToken()), zap.Strings("client_sans", a.set.Admin.ClientSANs))
	return nil
}

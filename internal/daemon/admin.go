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
	backend, forget, err := adminBackend(a.store)
	if err != nil {
		return err
	}
	srv := admin.New(a.svc, backend, auth,
		admin.WithKeyBuilder(config.KeyBuilder{Prefix: a.set.CacheKeyPrefix}),
		admin.WithLogger(a.log.Named("admin")),
		admin.WithForget(forget),
	)
	if err := srv.Register(m.Registry()); err != nil {
		return err
	}
	srv.RegisterGRPC(a.grpc)
	a.admin = srv
	a.log.Info("counters API enabled", zap.Bool("token", auth.HasToken()), zap.Strings("client_sans", a.set.Admin.ClientSANs))
	return nil
}

// adminBackend finds the store under the decorators, and the Forget of
// every decorator that remembers keys (the local cache's denials, the
// lease gate's blocks), which a reset must clear with the keys.
func adminBackend(st store.Store) (admin.Backend, func(...string), error) {
	var forgets []func(...string)
	forget := func(keys ...string) {
		for _, f := range forgets {
			f(keys...)
		}
	}
	for {
		if f, ok := st.(interface{ Forget(...string) }); ok {
			forgets = append(forgets, f.Forget)
		}
		if b, ok := st.(admin.Backend); ok {
			return b, forget, nil
		}
		u, ok := st.(interface{ Unwrap() store.Store })
		if !ok {
			return nil, nil, fmt.Errorf("counters API: the %T store cannot reset or list counters", st)
		}
		st = u.Unwrap()
	}
}

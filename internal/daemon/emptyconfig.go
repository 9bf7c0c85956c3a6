package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// emptyConfigAlarm makes an emptied config directory visible. Like
// envoyproxy, the empty config is applied (every limit is gone, which may
// be what the operator meant), but a ConfigMap mounted wrong or a deploy
// that lost its files looks exactly like that, so it is logged as a
// warning and counted.
type emptyConfigAlarm struct {
	loads prometheus.Counter
	log   *zap.Logger
	dir   string
}

func newEmptyConfigAlarm(reg prometheus.Registerer, log *zap.Logger, dir string) *emptyConfigAlarm {
	a := &emptyConfigAlarm{
		loads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ratelimitd", Name: "config_empty_loads_total",
			Help: "Config loads that applied a config without any domain: no request is limited."}),
		log: log,
		dir: dir,
	}
	reg.MustRegister(a.loads)
	return a
}

// observe checks a config just put in force.
func (a *emptyConfigAlarm) observe(cfg *config.Config) {
	if cfg == nil || len(cfg.Domains()) > 0 {
		return
	}
	a.loads.Inc()
	a.log.Warn("the config in force has no domain: no request is rate limited (an emptied config directory?)", zap.String("dir", a.dir))
}

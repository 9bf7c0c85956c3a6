package daemon

import (
	"time"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
)

// fallbackSettings are ON_STORE_ERROR, the on_store_error of rules that set
// none, and how on_store_error: local shares a limit
// (pkg/store/fallback): LOCAL_FALLBACK_REPLICAS, the replicas a replica
// assumes until it has seen another through Redis, and
// LOCAL_FALLBACK_HEARTBEAT, how often replicas tell Redis they are live.
type fallbackSettings struct {
	Default   config.StoreErrorAction
	Replicas  int
	Heartbeat time.Duration
}

// maxHeartbeat bounds LOCAL_FALLBACK_HEARTBEAT: a replica counts as live
// for three of them, and a minute's wait to see a replica leave or join is
// already longer than any share should lag.
const maxHeartbeat = time.Minute

func defaultFallbackSettings() fallbackSettings {
	return fallbackSettings{Default: config.StoreErrorUnavailable, Replicas: 1, Heartbeat: fallback.DefaultHeartbeat}
}

func (s *settings) readFallback(env *envReader) {
	f := defaultFallbackSettings()
	if v, ok := env.raw("ON_STORE_ERROR"); ok {
		a, err := config.ParseStoreErrorAction(v)
		if err != nil {
			env.fail("ON_STORE_ERROR", v, "unavailable, allow, deny or local")
		}
		f.Default = a
	}
	f.Replicas = env.integer("LOCAL_FALLBACK_REPLICAS", 1, 1, 1<<16)
	v, _ := env.raw("LOCAL_FALLBACK_HEARTBEAT")
	if f.Heartbeat = env.duration("LOCAL_FALLBACK_HEARTBEAT", f.Heartbeat); f.Heartbeat <= 0 || f.Heartbeat > maxHeartbeat {
		env.fail("LOCAL_FALLBACK_HEARTBEAT", v, "a positive Go duration of at most "+maxHeartbeat.String())
	}
	s.Fallback = f
}

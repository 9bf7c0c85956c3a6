package daemon

import (
	"path/filepath"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// readConfigSource reads where the rules are and how they load: the
// settings the service and `ratelimitd check` share, so that check loads
// exactly what the service would.
func (s *settings) readConfigSource(env *envReader) {
	root := env.str("RUNTIME_ROOT", "/srv/runtime_data/current")
	sub := env.str("RUNTIME_SUBDIRECTORY", "")
	app := env.str("RUNTIME_APPDIRECTORY", "config")
	watchRoot := env.boolean("RUNTIME_WATCH_ROOT", true)
	s.ConfigDir = filepath.Join(root, sub, app)
	s.WatchPath = s.ConfigDir
	if watchRoot {
		s.WatchPath = root
	}
	s.IgnoreDotfiles = env.boolean("RUNTIME_IGNOREDOTFILES", false)
	s.MergeDomains = env.boolean("MERGE_DOMAIN_CONFIG", false)
	s.CalendarMonths = env.boolean("USE_CALENDAR_MONTH_RATE_LIMIT", false)
}

// rulesOptions are how every source loads rules (files, xDS, `ratelimitd
// check`): MERGE_DOMAIN_CONFIG, USE_CALENDAR_MONTH_RATE_LIMIT and
// ON_STORE_ERROR.
func (s settings) rulesOptions() []config.Option {
	return []config.Option{
		config.WithMergeDomains(s.MergeDomains),
		config.WithCalendarMonths(s.CalendarMonths),
		config.WithStoreErrorDefault(s.Fallback.Default),
	}
}

package daemon

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/envoystats"
)

// statsSettings are envoyproxy's stats settings: where its stats
// (ratelimit.service.*, ratelimit_server.*) go besides Prometheus.
type statsSettings struct {
	// Disabled is DISABLE_STATS: none of envoyproxy's stats anywhere.
	Disabled bool
	// Statsd is USE_STATSD (envoyproxy's default, true), to Host:Port over
	// Protocol; DogStatsd is USE_DOG_STATSD, which replaces it.
	Statsd, DogStatsd bool
	Host              string
	Port              int
	Protocol          string
	// FlushInterval is STATS_FLUSH_INTERVAL; ExtraTags is EXTRA_TAGS.
	FlushInterval time.Duration
	ExtraTags     map[string]string
	// Mogrifiers are USE_DOG_STATSD_MOGRIFIERS' DOG_STATSD_MOGRIFIER_*.
	Mogrifiers []envoystats.Mogrifier
}

// readStats reads the stats settings with envoyproxy's defaults (gostats'
// for STATSD_PROTOCOL: tcp). It needs readPrometheus first.
func (s *settings) readStats(env *envReader) {
	st := &s.Stats
	st.Disabled = env.boolean("DISABLE_STATS", false)
	// envoyproxy refuses USE_PROMETHEUS with its default USE_STATSD=true,
	// so a deployment that works there sets USE_STATSD=false beside it;
	// here that is the default, and both may be on together.
	st.Statsd = env.boolean("USE_STATSD", !s.Prometheus.Enabled)
	st.DogStatsd = env.boolean("USE_DOG_STATSD", false)
	st.Host = env.str("STATSD_HOST", "localhost")
	st.Port = env.integer("STATSD_PORT", 8125, 1, maxPort)
	st.Protocol = env.oneOf("STATSD_PROTOCOL", "tcp", "tcp", "udp")
	st.FlushInterval = env.duration("STATS_FLUSH_INTERVAL", envoystats.DefaultFlushInterval)
	if st.FlushInterval == 0 {
		env.fail("STATS_FLUSH_INTERVAL", "0s", "a positive duration")
	}
	st.ExtraTags = tagMap(env, "EXTRA_TAGS")
	mogrifiers := readMogrifiers(env)
	if st.DogStatsd {
		st.Mogrifiers = mogrifiers
		// envoyproxy refuses both sinks at once; here DogStatsD, which
		// sends the same stats to the same agent, replaces statsd.
		if v, ok := env.raw("USE_STATSD"); ok && st.Statsd {
			s.Warnings = append(s.Warnings, fmt.Sprintf("USE_STATSD=%s has no effect with USE_DOG_STATSD=true: the stats go to DogStatsD only", v))
		}
		st.Statsd = false
	}
}

// tagMap reads envoyproxy's map syntax, key:value,key:value.
func tagMap(env *envReader, name string) map[string]string {
	v, ok := env.raw(name)
	if !ok {
		return nil
	}
	tags := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		k, val, found := strings.Cut(pair, ":")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !found || k == "" {
			env.fail(name, v, "key:value pairs separated by commas")
			return nil
		}
		tags[k] = val
	}
	return tags
}

// readMogrifiers reads USE_DOG_STATSD_MOGRIFIERS (names, comma-separated)
// and, for each NAME, DOG_STATSD_MOGRIFIER_NAME_PATTERN (a regular
// expression), _NAME (the stat name, $1... for its groups) and _TAGS
// (key:$1,...), as envoyproxy does.
func readMogrifiers(env *envReader) []envoystats.Mogrifier {
	v, ok := env.raw("USE_DOG_STATSD_MOGRIFIERS")
	if !ok {
		return nil
	}
	var out []envoystats.Mogrifier
	for _, name := range strings.Split(v, ",") {
		prefix := "DOG_STATSD_MOGRIFIER_" + strings.ToUpper(strings.TrimSpace(name)) + "_"
		pattern, hasPattern := env.raw(prefix + "PATTERN")
		statName, hasName := env.raw(prefix + "NAME")
		if !hasPattern || !hasName {
			env.fail("USE_DOG_STATSD_MOGRIFIERS", v, fmt.Sprintf("%sPATTERN and %sNAME set for each name", prefix, prefix))
			continue
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			env.fail(prefix+"PATTERN", pattern, "a regular expression")
			continue
		}
		out = append(out, envoystats.Mogrifier{Pattern: re, Name: statName, Tags: tagMap(env, prefix+"TAGS")})
	}
	return out
}

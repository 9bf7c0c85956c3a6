package envoystats

import (
	gostats "github.com/lyft/gostats"

	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
)

// localCacheScope is where envoyproxy roots its local cache's gauges:
// ratelimit.localcache.<name>.
const localCacheScope = "localcache"

// LocalCache is the local over-limit cache whose figures are exported;
// *localcache.Store is one.
type LocalCache interface {
	Gauges() localcache.Gauges
}

// localCacheGauges sets envoyproxy's local cache gauges from the cache's
// figures before every flush, as envoyproxy's stat generator does.
type localCacheGauges struct {
	cache                                                                     LocalCache
	hit, miss, lookup, entry, evacuate, expired, overwrite, averageAccessTime gostats.Gauge
}

// AddLocalCache exports c's figures as envoyproxy's
// ratelimit.localcache.{hitCount, missCount, lookupCount, entryCount,
// evacuateCount, expiredCount, overwriteCount, averageAccessTime}, set at
// every flush with the other stats.
func (s *Stats) AddLocalCache(c LocalCache) {
	scope := s.store.ScopeWithTags(rootScope, s.tags).Scope(localCacheScope)
	s.store.AddStatGenerator(&localCacheGauges{
		cache:             c,
		hit:               scope.NewGauge("hitCount"),
		miss:              scope.NewGauge("missCount"),
		lookup:            scope.NewGauge("lookupCount"),
		entry:             scope.NewGauge("entryCount"),
		evacuate:          scope.NewGauge("evacuateCount"),
		expired:           scope.NewGauge("expiredCount"),
		overwrite:         scope.NewGauge("overwriteCount"),
		averageAccessTime: scope.NewGauge("averageAccessTime"),
	})
}

func (g *localCacheGauges) GenerateStats() {
	v := g.cache.Gauges()
	g.hit.Set(v.HitCount)
	g.miss.Set(v.MissCount)
	g.lookup.Set(v.LookupCount)
	g.entry.Set(v.EntryCount)
	g.evacuate.Set(v.EvacuateCount)
	g.expired.Set(v.ExpiredCount)
	g.overwrite.Set(v.OverwriteCount)
	g.averageAccessTime.Set(uint64(max(v.AverageAccessTime, 0)))
}

package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// localQuiet is how long a rule goes without a local decision before it
// counts as back on the store: while some of its counters are decided
// locally and others not (a Cluster master down), it stays local.
const localQuiet = time.Second

// fallbackOf is a rule's on_store_error as the store requests carry it.
func fallbackOf(a config.StoreErrorAction) store.Fallback {
	switch a {
	case config.StoreErrorAllow:
		return store.FallbackAllow
	case config.StoreErrorDeny:
		return store.FallbackDeny
	case config.StoreErrorLocal:
		return store.FallbackLocal
	default:
		return store.FallbackNone
	}
}

// localRules are the rules deciding locally now (on_store_error: local,
// the store unable to decide), so that one line is logged when a rule goes
// local and one when it is back, not one per request.
type localRules struct {
	n     atomic.Int64
	rules sync.Map // ruleID -> *atomic.Int64, the unix nanoseconds of its last local decision
}

type ruleID struct{ domain, statKey string }

// noteLocal follows the rules of a decided request: a rule decided locally
// is (still) local; one the store decided, after localQuiet without a
// local decision, is back. A request's own limit is left out: its key
// comes from the request.
func (s *Service) noteLocal(p *plan, results []store.Result) {
	local := len(results) > 0 && results[0].Local
	if !local && s.local.n.Load() == 0 {
		return
	}
	now := s.now().UnixNano()
	for _, sl := range p.slots {
		if sl.kind != counted || sl.rule.FromRequest() {
			continue
		}
		id := ruleID{sl.rule.Domain, sl.rule.StatKey}
		if local {
			if p.rules[sl.decider].OnStoreError == config.StoreErrorLocal {
				s.wentLocal(id, now)
			}
			continue
		}
		if v, ok := s.local.rules.Load(id); ok && now-v.(*atomic.Int64).Load() > int64(localQuiet) {
			if _, gone := s.local.rules.LoadAndDelete(id); gone {
				s.local.n.Add(-1)
				s.log.Info("rule back on the store: decided there again after deciding locally",
					zap.String("domain", id.domain), zap.String("rule", id.statKey))
			}
		}
	}
}

func (s *Service) wentLocal(id ruleID, now int64) {
	if v, ok := s.local.rules.Load(id); ok {
		v.(*atomic.Int64).Store(now)
		return
	}
	last := new(atomic.Int64)
	last.Store(now)
	if _, loaded := s.local.rules.LoadOrStore(id, last); loaded {
		return
	}
	s.local.n.Add(1)
	s.log.Warn("rule deciding locally: the store cannot decide it, so this replica decides with its share of the limit (on_store_error: local)",
		zap.String("domain", id.domain), zap.String("rule", id.statKey))
}

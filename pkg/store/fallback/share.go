package fallback

import (
	"context"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Presence is how replicas learn of each other through the backend while
// it answers (redisstore.Presence is one, through an adapter).
type Presence interface {
	// Beat records replica id as live now, and as still deciding locally
	// counters the backend has not answered for since (local).
	Beat(ctx context.Context, id string, local bool) (Members, error)
	// Leave removes id, so that the others' shares grow at their next beat
	// instead of when id's last beat ages out.
	Leave(ctx context.Context, id string) error
}

// Members is what a beat says, this replica included.
type Members struct {
	// Live replicas, and those of them still local.
	Live, Local int
	// Oldest is when the live replica that beat longest ago beat last; Now
	// is when this beat was recorded. Both are on the presence's clock.
	Oldest, Now time.Time
	// Epoch stays the same while the backend keeps its data and changes
	// when it lost them (a Redis restarted empty).
	Epoch string
}

// membership is what the beats said: the last one's members, whether
// another replica was ever seen, and when this replica first beat after
// the backend came back (on the presence's clock; zero until then).
type membership struct {
	Members
	sawOther  bool
	beatAt    time.Time // on this store's clock
	recovered time.Time
}

// divisor is the number of replicas a limit is shared by: the replicas
// live at the last beat, once this replica has seen another; before that
// (started while the backend was down, or alone so far) fallback, the
// configured count.
func (m membership) divisor(fallback int) uint64 {
	if m.sawOther && m.Live > 0 {
		return uint64(m.Live)
	}
	return uint64(max(fallback, 1))
}

// scale is lim shared by n replicas: every count divided by n, rounded
// down, so that n shares never add up to more than the limit. A share that
// rounds down to nothing admits nothing (a limit of zero requests).
func scale(lim algorithms.Limit, n uint64) algorithms.Limit {
	if n <= 1 {
		return lim
	}
	out := lim
	out.Requests = lim.Requests / n
	out.MaxDebt = lim.MaxDebt / n
	if lim.Burst > 0 {
		out.Burst = lim.Burst / n
		if out.Burst == 0 {
			// A burst of 0 would mean Requests: no share of it is left.
			out.Requests = 0
		}
	}
	return out
}

// share is this replica's part of what the backend had left, remaining,
// under scaled: remaining / n, never more than the share's capacity.
func share(remaining uint64, scaled algorithms.Limit, n uint64) uint64 {
	return min(remaining/max(n, 1), scaled.Capacity())
}

// Beat tells the presence this replica is live, and whether it is still
// local, and learns how many replicas are, and the backend's epoch.
// Without a presence it does nothing.
func (s *Store) Beat(ctx context.Context) error {
	p := s.opts.presence
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	s.mu.Lock()
	local := s.unconfirmed()
	s.mu.Unlock()
	m, err := p.Beat(ctx, s.opts.id, local)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.members.recovered = time.Time{} // the backend may be down again
		return err
	}
	s.members.Members, s.members.beatAt = m, s.now()
	s.members.sawOther = s.members.sawOther || m.Live > 1
	if s.members.recovered.IsZero() && len(s.entries) > 0 {
		s.members.recovered = m.Now
	}
	return nil
}

// releasable reports whether the counters decided here may go back to the
// backend: every live replica has beaten since this one found the backend
// back (a beat from before the outage may say "not local" of a replica
// that went local since), and none of them is still local. mu is held.
func (s *Store) releasable() bool {
	m := s.members
	return !m.recovered.IsZero() && m.Local == 0 && !m.Oldest.Before(m.recovered)
}

// presenceLost reports whether no beat has succeeded for presenceLostAfter
// heartbeats: a presence that fails while charges succeed (an ACL without
// its commands) must not keep counters local for ever, so they go back as
// they would without one. mu is held.
func (s *Store) presenceLost() bool {
	return s.now().Sub(s.members.beatAt) > presenceLostAfter*s.opts.heartbeat
}

// presenceLostAfter is how many heartbeats without a beat make the
// presence lost; more than a Cluster failover of its slot takes.
const presenceLostAfter = 10

// unconfirmed reports whether a counter decided here has had no answer
// from the backend since it went local. mu is held.
func (s *Store) unconfirmed() bool {
	for _, e := range s.entries {
		if !e.confirmed {
			return true
		}
	}
	return false
}

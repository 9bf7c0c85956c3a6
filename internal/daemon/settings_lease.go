package daemon

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// Defaults of the LEASE_* settings (docs/leases.md) are the lease
// package's own.
const (
	defaultLeaseTarget   = lease.DefaultTarget
	defaultLeaseMaxBlock = lease.DefaultMaxBlock
	defaultLeaseFraction = lease.DefaultFraction
	defaultLeaseIdle     = lease.DefaultIdle
	defaultLeaseMaxAge   = lease.DefaultMaxAge
	defaultLeaseMaxKeys  = lease.DefaultMaxKeys
	// maxLeaseDuration bounds LEASE_TARGET, LEASE_IDLE and LEASE_MAX_AGE: a
	// lease outliving a day serves no limit ratelimitd has (a window ends
	// it first, a bucket's slots lapse), so a longer value is a typo.
	maxLeaseDuration = 24 * time.Hour
	// maxLeaseBlock bounds LEASE_MAX_BLOCK by the counts algorithms take
	// exactly (algorithms.MaxCount is 2^40).
	maxLeaseBlock = 1 << 40
)

// leaseSettings are the LEASE_* settings: whether rules lease by default
// and how the lease decorator (pkg/store/lease) sizes and ends blocks.
type leaseSettings struct {
	// Enabled is LEASE_ENABLED: every rule that can lease does, unless it
	// says lease: false.
	Enabled  bool
	Target   time.Duration
	MaxBlock uint64
	Fraction float64
	Idle     time.Duration
	MaxAge   time.Duration
	MaxKeys  int
}

func defaultLeaseSettings() leaseSettings {
	return leaseSettings{
		Target:   defaultLeaseTarget,
		MaxBlock: defaultLeaseMaxBlock,
		Fraction: defaultLeaseFraction,
		Idle:     defaultLeaseIdle,
		MaxAge:   defaultLeaseMaxAge,
		MaxKeys:  defaultLeaseMaxKeys,
	}
}

// readLease reads the LEASE_* settings. They are read whether or not
// LEASE_ENABLED is on: a rule's lease: true uses them too.
func (s *settings) readLease(env *envReader) {
	l := defaultLeaseSettings()
	l.Enabled = env.boolean("LEASE_ENABLED", false)
	l.Target = leaseDuration(env, "LEASE_TARGET", l.Target)
	l.MaxBlock = uint64(env.integer("LEASE_MAX_BLOCK", defaultLeaseMaxBlock, 2, maxLeaseBlock))
	l.Fraction = leaseFraction(env, l.Fraction)
	l.Idle = leaseDuration(env, "LEASE_IDLE", l.Idle)
	l.MaxAge = leaseDuration(env, "LEASE_MAX_AGE", l.MaxAge)
	l.MaxKeys = env.integer("LEASE_MAX_KEYS", defaultLeaseMaxKeys, 1, math.MaxInt32)
	s.Lease = l
}

// leaseDuration is a positive duration of at most maxLeaseDuration.
func leaseDuration(env *envReader, name string, def time.Duration) time.Duration {
	v, _ := env.raw(name)
	d := env.duration(name, def)
	if d == 0 || d > maxLeaseDuration {
		env.fail(name, v, fmt.Sprintf("a positive Go duration of at most %s, such as %q", maxLeaseDuration, def))
		return def
	}
	return d
}

// leaseFraction is LEASE_FRACTION, in (0, 1]: 0 would never lease (turn
// leases off with LEASE_ENABLED=false and lease: false instead).
func leaseFraction(env *envReader, def float64) float64 {
	v, ok := env.raw("LEASE_FRACTION")
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0 && f <= 1) {
		env.fail("LEASE_FRACTION", v, "a number above 0 and at most 1 (the share of what a counter has left that one block may take)")
		return def
	}
	return f
}

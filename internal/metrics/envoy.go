package metrics

import "github.com/ratelimitd/ratelimitd/internal/envoystats"

// WithEnvoyStats also counts every decision in envoyproxy/ratelimit's stats
// (statsd names, Prometheus through its mapping), under the same stats keys
// and within the same cap on request-derived keys.
func WithEnvoyStats(s *envoystats.Stats) Option { return func(m *Metrics) { m.envoy = s } }

// ServiceError counts a request refused before the backend (malformed, no
// config loaded): envoyproxy's should_rate_limit.service_error.
func (m *Metrics) ServiceError() {
	if m.envoy != nil {
		m.envoy.ServiceError()
	}
}

// GlobalShadowMode counts a request SHADOW_MODE answered OK although it was
// over a limit.
func (m *Metrics) GlobalShadowMode() {
	if m.envoy != nil {
		m.envoy.GlobalShadowMode()
	}
}

// DomainNotFound counts the descriptors of a request for a domain no config
// has.
func (m *Metrics) DomainNotFound(domain string, descriptors int) {
	if m.envoy != nil {
		m.envoy.DomainNotFound(domain, descriptors)
	}
}

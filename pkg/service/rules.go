package service

import (
	"sync/atomic"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// Rules is a loaded rate-limit configuration: envoyproxy/ratelimit's YAML
// (domain, descriptors, rate_limit) plus ratelimitd's extensions (algorithm,
// burst, rate_limits, on_store_error, ...), as README.md and
// api/config.schema.json describe it. It is immutable and may be shared by
// several Services.
//
// Its representation is the daemon's loaded config, so that the daemon
// hands each reload to its Service without a copy; outside this module that
// type cannot be named, and Rules is opaque.
type Rules config.Config

func (r *Rules) config() *config.Config { return (*config.Config)(r) }

// RulesFile is one YAML file of rules: one domain, as envoyproxy takes it.
// Name is what its errors call it (file:line: field: message).
type RulesFile struct {
	Name string
	YAML []byte
}

// ParseRules parses files in order. Two files may not configure the same
// domain. It returns every error of every file, joined.
func ParseRules(files ...RulesFile) (*Rules, error) {
	in := make([]config.File, len(files))
	for i, f := range files {
		in[i] = config.File{Name: f.Name, Data: f.YAML}
	}
	cfg, err := config.Parse(in)
	if err != nil {
		return nil, err
	}
	return (*Rules)(cfg), nil
}

// LoadRules parses the *.yaml and *.yml files directly in dir, in name
// order, as ratelimitd reads its config directory: symlinks are followed (a
// Kubernetes ConfigMap mount works), and two files may not configure the
// same domain. An empty directory gives empty Rules, under which every
// request is OK.
func LoadRules(dir string) (*Rules, error) {
	cfg, err := config.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	return (*Rules)(cfg), nil
}

// Domains lists the configured domains, sorted.
func (r *Rules) Domains() []string { return r.config().Domains() }

// ConfigSource yields the rules in force on every request: a watcher of
// files or of a control plane, whose reloads then need no SetRules (the
// daemon's watches its config directory or xDS). Current returns nil while
// it has no rules.
type ConfigSource interface {
	Current() *Rules
}

// WithConfigSource decides every request with src's current rules instead
// of the Rules given to New and SetRules, which then change nothing.
func WithConfigSource(src ConfigSource) Option {
	return func(o *options) { o.source = src }
}

// coreSource is a ConfigSource as the core service reads it.
type coreSource struct{ src ConfigSource }

func (s coreSource) Current() *config.Config { return s.src.Current().config() }

// rulesSource is the rules in force, swapped whole by SetRules so that a
// request decides with one set of rules from start to end.
type rulesSource struct {
	rules atomic.Pointer[Rules]
}

func (r *rulesSource) Current() *Rules { return r.rules.Load() }

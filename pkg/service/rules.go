package service

import (
	"github.com/ratelimitd/ratelimitd/internal/config"
)

// Rules is a loaded rate-limit configuration: envoyproxy/ratelimit's YAML
// (domain, descriptors, rate_limit) plus ratelimitd's extensions (algorithm,
// burst, rate_limits, on_store_error, ...), as README.md and
// api/config.schema.json describe it. It is immutable and may be shared by
// several Services.
type Rules struct {
	cfg *config.Config
}

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
	return &Rules{cfg: cfg}, nil
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
	return &Rules{cfg: cfg}, nil
}

// Domains lists the configured domains, sorted.
func (r *Rules) Domains() []string { return r.cfg.Domains() }

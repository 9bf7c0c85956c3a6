package daemon

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// errCheckFailed marks a check that found errors; they are already printed.
var errCheckFailed = errors.New("config check failed")

// runCheck is `ratelimitd check [--config DIR] [--merge_domain_configs]`,
// envoyproxy's config_check_cmd (whose -config_dir and
// -merge_domain_configs flags it also takes). It loads the rules the
// service would load: the RUNTIME_* directory unless --config names one,
// with MERGE_DOMAIN_CONFIG and RUNTIME_IGNOREDOTFILES. It prints every
// error as file:line: field: message, one a line, and fails when there is
// one; otherwise it prints a one-line summary.
func runCheck(args []string, lookup func(string) (string, bool), out io.Writer) error {
	env := &envReader{lookup: lookup}
	var set settings
	set.readConfigSource(env)
	if err := env.err(); err != nil {
		return fmt.Errorf("check: invalid environment: %w", err)
	}
	fs := flag.NewFlagSet("ratelimitd check", flag.ContinueOnError)
	fs.SetOutput(out)
	dir := fs.String("config", set.ConfigDir, "directory of rate limit YAML files (default from RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY)")
	fs.StringVar(dir, "config_dir", set.ConfigDir, "same as --config, as envoyproxy's config check names it")
	merge := fs.Bool("merge_domain_configs", set.MergeDomains, "merge files that configure the same domain (default from MERGE_DOMAIN_CONFIG)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("check: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("check: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := config.LoadDir(*dir,
		config.WithMergeDomains(*merge),
		config.WithCalendarMonths(set.CalendarMonths),
		config.WithIgnoreDotfiles(set.IgnoreDotfiles),
	)
	if err != nil {
		lines := strings.Split(err.Error(), "\n")
		for _, line := range lines {
			fmt.Fprintln(out, line)
		}
		return fmt.Errorf("%w: %d error(s) in %s", errCheckFailed, len(lines), *dir)
	}
	fmt.Fprintln(out, summary(*dir, cfg))
	return nil
}

// summary says what loaded, per domain, so that a file that contributed
// nothing (a typo in its name, say) shows.
func summary(dir string, cfg *config.Config) string {
	domains := cfg.Domains()
	if len(domains) == 0 {
		return dir + ": OK, 0 domain(s), 0 rule(s): no *.yaml or *.yml file configures a domain"
	}
	total := 0
	parts := make([]string, len(domains))
	for i, d := range domains {
		n := cfg.CountRules(d)
		total += n
		parts[i] = fmt.Sprintf("%s (%d)", d, n)
	}
	return fmt.Sprintf("%s: OK, %d domain(s), %d rule(s): %s", dir, len(domains), total, strings.Join(parts, ", "))
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ratelimitd/ratelimitd/pkg/config"
)

// errCheckFailed marks a check that found errors; they are already printed.
var errCheckFailed = errors.New("config check failed")

// runCheck is `ratelimitd check [--config DIR]`, envoyproxy's
// config_check_cmd: it loads the rules the service would load (the same
// RUNTIME_* directory, MERGE_DOMAIN_CONFIG and RUNTIME_IGNOREDOTFILES
// unless --config names the directory), prints every error as
// file:line: field: message, and fails when there is one.
func runCheck(args []string, lookup func(string) (string, bool), out io.Writer) error {
	set, err := parseSettings(nil, lookup)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("ratelimitd check", flag.ContinueOnError)
	fs.SetOutput(out)
	dir := fs.String("config", set.ConfigDir, "directory of rate limit YAML files")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("check: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := config.LoadDir(*dir,
		config.WithMergeDomains(set.MergeDomains),
		config.WithIgnoreDotfiles(set.IgnoreDotfiles),
	)
	if err != nil {
		lines := strings.Split(err.Error(), "\n")
		for _, line := range lines {
			fmt.Fprintln(out, line)
		}
		return fmt.Errorf("%w: %d error(s) in %s", errCheckFailed, len(lines), *dir)
	}
	domains := cfg.Domains()
	fmt.Fprintf(out, "%s: OK, %d domain(s): %s\n", *dir, len(domains), strings.Join(domains, ", "))
	return nil
}

// Package daemon is ratelimitd: its settings (envoyproxy/ratelimit's
// environment and flags), the store (pkg/store/stack), the service
// (pkg/service), its servers, stats, signals and shutdown, and `ratelimitd
// check`. cmd/ratelimitd's main calls Run.
package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is ratelimitd with its command-line arguments (after the program
// name) and environment: it serves until SIGINT/SIGTERM (or ctx) stops it;
// `ratelimitd check` validates a config directory instead. version is the
// build's, sent as the xDS client's user agent. Its error is masked like the
// logs (settings.redactor): main prints it.
func Run(ctx context.Context, version string, args []string, lookup func(string) (string, bool), stderr io.Writer) (err error) {
	if len(args) > 0 && args[0] == "check" {
		return runCheck(args[1:], lookup, stderr)
	}
	set, err := parseSettings(args, lookup)
	if errors.Is(err, errHelp) {
		printUsage(stderr)
		return nil
	}
	if err != nil {
		return err
	}
	set.Version = version
	defer func() { err = set.redactor().Error(err) }()
	log, announce := newLoggers(set, stderr)
	defer func() { _ = log.Sync() }()
	defer routeLibraryLogs(log)()
	for _, w := range set.Warnings {
		log.Warn(w)
	}
	set.backend().routeLogs(log)
	tuneGC(set, lookup)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	a, err := newApp(set, log)
	if err != nil {
		return err
	}
	if err := a.awaitConfig(ctx); err != nil {
		return a.abort(err)
	}
	if err := a.listen(); err != nil {
		return a.abort(err)
	}
	a.announce(announce)
	if err := a.writeReady(); err != nil {
		return a.abort(err)
	}
	return a.serve(ctx, hup)
}

package config

import (
	"time"

	"go.uber.org/zap"
)

// WatcherOption tunes NewWatcher.
type WatcherOption func(*watcherOptions)

type watcherOptions struct {
	watchPath string
	load      []Option
	log       *zap.Logger
	onReload  func(*Config, error)
	debounce  time.Duration
	// startWithoutConfig: see WithStartWithoutConfig.
	startWithoutConfig bool
}

// DefaultDebounce lets an editor's or a deploy tool's burst of writes settle
// into one reload instead of loading half-written files.
const DefaultDebounce = 100 * time.Millisecond

// WithWatchPath watches path instead of the config directory: the runtime
// root when RUNTIME_WATCH_ROOT=true. The root may be a symlink that a deploy
// swaps atomically to a new tree, as with envoyproxy's runtime; the swap
// triggers a reload. The config directory itself is watched as well.
func WithWatchPath(path string) WatcherOption {
	return func(o *watcherOptions) { o.watchPath = path }
}

// WithLoadOptions passes options to every load (merge domains, dotfiles).
func WithLoadOptions(opts ...Option) WatcherOption {
	return func(o *watcherOptions) { o.load = append(o.load, opts...) }
}

// WithLogger logs reloads and reload failures; the default logs nothing.
func WithLogger(log *zap.Logger) WatcherOption {
	return func(o *watcherOptions) {
		if log != nil {
			o.log = log
		}
	}
}

// WithOnReload is called after every reload attempt (not the initial load):
// with the new config and nil, or with nil and the error while Current keeps
// the previous config. It runs with reloads serialized, so it must not call
// Reload; it may call Current.
func WithOnReload(fn func(cfg *Config, err error)) WatcherOption {
	return func(o *watcherOptions) { o.onReload = fn }
}

// WithDebounce sets how long the directory must stay quiet before a reload;
// zero reloads on every event.
func WithDebounce(d time.Duration) WatcherOption {
	return func(o *watcherOptions) { o.debounce = max(d, 0) }
}

// WithStartWithoutConfig lets NewWatcher succeed when the initial load fails
// (FORCE_START_WITHOUT_INITIAL_CONFIG): Current is nil until a reload
// succeeds, and the error is logged instead of returned.
func WithStartWithoutConfig(on bool) WatcherOption {
	return func(o *watcherOptions) { o.startWithoutConfig = on }
}

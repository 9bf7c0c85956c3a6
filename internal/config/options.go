package config

// Option tunes Parse and LoadDir.
type Option func(*options)

type options struct {
	mergeDomains   bool
	ignoreDotfiles bool
	calendarMonths bool
	storeError     StoreErrorAction
}

// WithMergeDomains lets several files configure the same domain, their
// descriptors merged (MERGE_DOMAIN_CONFIG). Without it a repeated domain is
// a load error.
func WithMergeDomains(merge bool) Option {
	return func(o *options) { o.mergeDomains = merge }
}

// WithIgnoreDotfiles makes LoadDir skip files whose name starts with a dot
// (RUNTIME_IGNOREDOTFILES), such as editors' swap files.
func WithIgnoreDotfiles(ignore bool) Option {
	return func(o *options) { o.ignoreDotfiles = ignore }
}

// WithCalendarMonths makes the windows of fixed_window and sliding_window
// rules with unit month UTC calendar months (USE_CALENDAR_MONTH_RATE_LIMIT,
// envoyproxy's setting): unit_multiplier of them, each as long as it is,
// instead of 30-day windows counted from the epoch. Other algorithms keep
// their rate over 30 days a month.
func WithCalendarMonths(on bool) Option {
	return func(o *options) { o.calendarMonths = on }
}

// WithStoreErrorDefault is the on_store_error of every rule that does not
// set one, and of a request's own limit (ON_STORE_ERROR); the default is
// unavailable.
func WithStoreErrorDefault(a StoreErrorAction) Option {
	return func(o *options) { o.storeError = a }
}

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

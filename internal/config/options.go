package config

// Option tunes Parse and LoadDir.
type Option func(*options)

type options struct {
	mergeDomains   bool
	ignoreDotfiles bool
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

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

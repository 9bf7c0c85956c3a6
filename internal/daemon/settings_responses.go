package daemon

import "github.com/ratelimitd/ratelimitd/pkg/service"

// readResponses reads what shapes answers: modes, health, headers and the
// request caps.
func (s *settings) readResponses(env *envReader) {
	s.ShadowMode = env.boolean("SHADOW_MODE", false)
	s.ForceStartWithoutConfig = env.boolean("FORCE_START_WITHOUT_INITIAL_CONFIG", false)
	s.HealthyWithAtLeastOneConfig = env.boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false)
	s.DynamicMetadata = env.boolean("RESPONSE_DYNAMIC_METADATA", false)
	s.QuotaMode = env.boolean("QUOTA_MODE", false)
	s.QuotaGroups = env.boolean("QUOTA_GROUP_BY_BACKEND", false)
	s.Headers = service.Headers{
		Classic:    env.boolean("LIMIT_RESPONSE_HEADERS_ENABLED", false),
		Limit:      env.str("LIMIT_LIMIT_HEADER", service.DefaultLimitHeader),
		Remaining:  env.str("LIMIT_REMAINING_HEADER", service.DefaultRemainingHeader),
		Reset:      env.str("LIMIT_RESET_HEADER", service.DefaultResetHeader),
		Draft:      env.boolean("LIMIT_DRAFT_HEADERS_ENABLED", false),
		RetryAfter: env.boolean("LIMIT_RETRY_AFTER_HEADER_ENABLED", false),
		// envoyproxy #1168: the same headers on the request forwarded
		// upstream, named on their own.
		Request:          env.boolean("LIMIT_REQUEST_HEADERS_ENABLED", false),
		RequestLimit:     env.str("LIMIT_REQUEST_LIMIT_HEADER", service.DefaultLimitHeader),
		RequestRemaining: env.str("LIMIT_REQUEST_REMAINING_HEADER", service.DefaultRemainingHeader),
		RequestReset:     env.str("LIMIT_REQUEST_RESET_HEADER", service.DefaultResetHeader),
		// envoyproxy's open #1190: a pair per counted limit.
		AllLimits: env.boolean("LIMIT_ALL_DESCRIPTORS_HEADERS_ENABLED", false),
	}
	s.MaxDescriptors = env.integer("MAX_DESCRIPTORS", service.DefaultMaxDescriptors, 1, 1<<16)
	s.MaxEntries = env.integer("MAX_DESCRIPTOR_ENTRIES", service.DefaultMaxEntries, 1, 1<<16)
	s.MaxValueLen = env.integer("MAX_VALUE_LENGTH", service.DefaultMaxValueLen, 1, 1<<20)
}

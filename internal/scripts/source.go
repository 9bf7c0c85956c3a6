package scripts

import _ "embed"

// The script is these files concatenated in this order: helpers first, then
// the storage kinds and algorithms the driver refers to, the driver last.
var (
	//go:embed lua/math.lua
	mathLua string
	//go:embed lua/hash.lua
	hashLua string
	//go:embed lua/fixed_window.lua
	fixedWindowLua string
	//go:embed lua/sliding_log.lua
	slidingLogLua string
	//go:embed lua/sliding_window.lua
	slidingWindowLua string
	//go:embed lua/token_bucket.lua
	tokenBucketLua string
	//go:embed lua/leaky_bucket.lua
	leakyBucketLua string
	//go:embed lua/gcra.lua
	gcraLua string
	//go:embed lua/take.lua
	takeLua string
)

var source = mathLua + hashLua + fixedWindowLua + slidingLogLua + slidingWindowLua +
	tokenBucketLua + leakyBucketLua + gcraLua + takeLua

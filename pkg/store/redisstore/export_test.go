package redisstore

// Retryable reports whether err certainly ran nothing in Redis, so that the
// store retries it (after a topology refresh) within the caller's deadline;
// the external tests check the classification through it.
func Retryable(err error) bool { return classify(err) == notRun }

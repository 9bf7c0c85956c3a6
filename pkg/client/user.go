package client

import "context"

type userKey struct{}

// WithUser returns ctx carrying the caller's user id, for the User action:
// the authentication middleware or interceptor in front of the limiter
// calls it.
func WithUser(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, userKey{}, id)
}

// UserFrom returns the user id WithUser put in ctx.
func UserFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(userKey{}).(string)
	return id, ok
}

package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/ratelimitd/ratelimitd/internal/certname"
)

// errUnauthenticated never says which credential was wrong or missing.
var errUnauthenticated = errors.New("the counters API needs the admin credential")

// Auth is the admin credential: a bearer token, client certificate names,
// or both (either one admits a call). The zero Auth admits nobody.
type Auth struct {
	// tokenSum is the token's SHA-256: comparing sums in constant time
	// hides the token's length as well as its bytes.
	tokenSum [sha256.Size]byte
	hasToken bool
	sans     []string
}

// NewAuth builds the credential from a token (nil or empty: none) and the
// client certificate SANs allowed over mutual TLS (none: none).
func NewAuth(token []byte, sans []string) Auth {
	a := Auth{sans: sans}
	if len(token) > 0 {
		a.tokenSum, a.hasToken = sha256.Sum256(token), true
	}
	return a
}

// Enabled says whether any credential is configured; without one the
// counters API is not served at all.
func (a Auth) Enabled() bool { return a.hasToken || len(a.sans) > 0 }

// HasToken says whether a bearer token is configured, the only credential
// the debug port (plain HTTP) can check.
func (a Auth) HasToken() bool { return a.hasToken }

// token checks an Authorization value, "Bearer <token>".
func (a Auth) token(authz string) bool {
	if !a.hasToken {
		return false
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(authz), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1
}

// grpc names the caller of a gRPC call ("token", or "san:<name>" for a
// client certificate), or fails.
func (a Auth) grpc(ctx context.Context) (string, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get("authorization") {
			if a.token(v) {
				return "token", nil
			}
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 {
			if name, ok := a.certificate(info.State.VerifiedChains[0][0]); ok {
				return "san:" + name, nil
			}
		}
	}
	return "", errUnauthenticated
}

// certificate returns the first allowed SAN c carries. Only verified
// chains are looked at: the TLS server checked them against
// GRPC_CLIENT_TLS_CACERT.
func (a Auth) certificate(c *x509.Certificate) (string, bool) {
	for _, san := range a.sans {
		if certname.Has(c, san) {
			return san, true
		}
	}
	return "", false
}

// http names the caller of a debug-port request; only the token can be
// checked there.
func (a Auth) http(r *http.Request) (string, error) {
	for _, v := range r.Header.Values("Authorization") {
		if a.token(v) {
			return "token", nil
		}
	}
	return "", errUnauthenticated
}

// Package sasl holds cohort's server side of the SASL mechanisms a Kafka
// client can authenticate with: SCRAM-SHA-256 and SCRAM-SHA-512 (RFC
// 5802/7677), PLAIN (RFC 4616, checked against the stored SCRAM credentials
// so there is one password store), and OAUTHBEARER (RFC 7628, KIP-255: a
// JWT verified against a JWKS file).
//
// The server drives a Session with the tokens of SaslAuthenticate requests
// (or raw frames after a v0 SaslHandshake); the package does no I/O of its
// own except reading the JWKS file.
package sasl

import (
	"context"
	"errors"
	"time"
)

// Mechanism names as clients send them in SaslHandshake.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	Plain       = "PLAIN"
	OAuthBearer = "OAUTHBEARER"
)

// ErrAuthFailed wraps every authentication failure. Its messages name the
// reason (unknown user, bad proof, expired token, ...) and never a secret;
// the server logs them and answers clients with a fixed text.
var ErrAuthFailed = errors.New("authentication failed")

// Credential is one user's stored SCRAM credential for one mechanism (RFC
// 5802: the salted password never leaves NewCredential; only the salt, the
// iteration count, StoredKey and ServerKey are kept).
type Credential struct {
	Mechanism  string // ScramSHA256 or ScramSHA512
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// Credentials looks up stored credentials. Implementations must be safe
// for concurrent use; lookups happen at every authentication.
type Credentials interface {
	// Lookup returns user's credential for mechanism (ScramSHA256 or
	// ScramSHA512).
	Lookup(user, mechanism string) (Credential, bool)
}

// Mechanism is one enabled SASL mechanism.
type Mechanism interface {
	// Name is the mechanism's name as in SaslHandshake.
	Name() string
	// Start begins one authentication exchange.
	Start() Session
}

// Session is one authentication exchange on one connection.
type Session interface {
	// Step consumes the client's next token and returns the server's
	// answer. done is true when the client is authenticated (out may
	// still carry a final server message to send). A non-nil err (wrapping
	// ErrAuthFailed) ends the exchange as a failure; out may then carry
	// a message the mechanism sends with the failure (OAUTHBEARER's JSON
	// error), which the server does not have to use.
	Step(in []byte) (out []byte, done bool, err error)
	// Principal is the authenticated principal, e.g. "User:alice", once
	// Step reported done.
	Principal() string
	// Expiry is when the credential used stops being valid (an
	// OAUTHBEARER token's exp), or the zero time when it does not expire.
	// The server caps the session lifetime (KIP-368) to it.
	Expiry() time.Time
}

// ContextStepper is a Session whose Step may wait before it works (PLAIN
// waits for a slot to check a password in). StepContext is its Step that
// gives up, as a failed exchange, once ctx is done: the server passes the
// connection's authentication deadline and its hang-up.
type ContextStepper interface {
	StepContext(ctx context.Context, in []byte) (out []byte, done bool, err error)
}

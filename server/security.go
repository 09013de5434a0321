package server

import (
	"context"
	"crypto/x509"
	"time"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/sasl"
)

// Security protocols of a listener, Kafka's names.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// Anonymous is the principal of a connection that authenticated no one
// (PLAINTEXT, or SSL without a client certificate), as in Kafka.
const Anonymous = "User:ANONYMOUS"

// Security configures authentication and authorization. A nil
// *Security in Config means none: every connection is Anonymous and every
// request allowed.
type Security struct {
	// Mechanisms are the enabled SASL mechanisms, by name. SASL listeners
	// need at least one.
	Mechanisms map[string]sasl.Mechanism
	// SessionLifetime (KIP-368), 0 = sessions do not expire. A SASL
	// connection must re-authenticate within it (capped by the
	// credential's own expiry), or it is closed at its next request.
	SessionLifetime time.Duration
	// FailedAuthDelay is how long the server waits after a failed
	// authentication before answering and closing: 0 means the default,
	// 100ms as in Kafka; negative means no wait.
	FailedAuthDelay time.Duration
	// AuthTimeout bounds the TLS handshake and the SASL exchange of a new
	// connection together, from its start (default 10s).
	AuthTimeout time.Duration
	// Now is the clock of session lifetimes (nil: time.Now).
	Now func() time.Time
	// PrincipalOf maps a verified client certificate to a principal
	// ("User:..."); nil means "User:" + the subject's CN.
	PrincipalOf func(*x509.Certificate) (string, error)
	// Authorizer decides every request; nil allows everything.
	Authorizer Authorizer
	// Admin serves the ACL and SCRAM credential APIs (CreateAcls,
	// DescribeAcls, DeleteAcls, DescribeUserScramCredentials,
	// AlterUserScramCredentials); nil leaves them unadvertised.
	Admin SecurityAdmin
}

// Authorizer decides whether a principal may perform an operation on a
// resource. Implementations must be safe for concurrent use and fast: it
// is called on every request.
type Authorizer interface {
	Authorize(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool
	// AuthorizedOperations is Kafka's bit field (1<<op for each allowed
	// operation) for IncludeAuthorizedOperations.
	AuthorizedOperations(principal, host string, rt acl.ResourceType, name string) int32
}

// UserCredential describes one stored SCRAM credential (never its keys).
type UserCredential struct {
	Mechanism  string
	Iterations int
}

// UserUpsert sets a user's credential for one mechanism: the salted
// password comes from the client (AlterUserScramCredentials carries the
// salt, iterations and salted password, never the password itself).
type UserUpsert struct {
	User           string
	Mechanism      string
	Iterations     int
	Salt           []byte
	SaltedPassword []byte
}

// UserDeletion deletes a user's credential for one mechanism.
type UserDeletion struct {
	User      string
	Mechanism string
}

// SecurityAdmin is the durable state behind the security admin APIs.
type SecurityAdmin interface {
	// Users returns the named users' credentials (all users when names is
	// nil); a user without credentials is absent.
	Users(names []string) map[string][]UserCredential
	// AlterUsers applies upserts and deletions; errs[i] is the result of
	// the i-th change, upserts first then deletions, in order.
	AlterUsers(ctx context.Context, upserts []UserUpsert, deletions []UserDeletion) (errs []error)
	// ACLs returns the bindings matching f.
	ACLs(f acl.Filter) []acl.Binding
	// CreateACLs stores bindings; errs[i] is the i-th binding's result.
	CreateACLs(ctx context.Context, bs []acl.Binding) (errs []error)
	// DeleteACLs deletes, per filter, the bindings it matches and returns
	// them; errs[i] is the i-th filter's result.
	DeleteACLs(ctx context.Context, fs []acl.Filter) (deleted [][]acl.Binding, errs []error)
}

// ExternalAuthentication records an authentication made outside the Kafka
// listeners, on the node's HTTP listener (--metrics-auth): it is counted
// in cohort_server_authentications_total under listener and mechanism
// and, when it failed, logged with attrs on the budget of the listeners'
// failed authentications, so that a password guesser on HTTP cannot flood
// the log either.
func (s *Server) ExternalAuthentication(listener, mechanism string, ok bool, attrs ...any) {
	if s.metrics != nil {
		result := "failure"
		if ok {
			result = "success"
		}
		s.metrics.auth.WithLabelValues(listener, mechanism, result).Inc()
	}
	if !ok {
		s.authLog.info(s.log, "authentication failed", append([]any{"listener", listener, "mechanism", mechanism}, attrs...)...)
	}
}

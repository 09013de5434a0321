package sasl

import (
	"bytes"
	"context"
	"crypto/subtle"
	"runtime"
	"time"
	"unicode/utf8"
)

// maxPlainMessage bounds a PLAIN message; RFC 4616 asks servers to accept
// 255 bytes for each of its three parts.
const maxPlainMessage = 4096

// NewPlain returns the server side of PLAIN (RFC 4616) checked against the
// stored SCRAM credentials, so that cohort keeps one password store and no
// clear passwords. The one client message is "authzid NUL authcid NUL
// passwd"; as in Kafka's PlainSaslServer the authzid must be empty or
// equal to authcid, and authcid and passwd must not be empty.
//
// The password is SASLprep-normalized and salted with the user's stored
// salt and iteration count (SCRAM-SHA-512 if the user has that
// credential, else SCRAM-SHA-256); the StoredKey derived from it is
// compared in constant time. An unknown user costs the same PBKDF2 work,
// on a fake SCRAM-SHA-512 credential of MinIterations. Nothing derived
// from the password outlives the Step.
//
// One Step: done is true and out empty on success.
func NewPlain(creds Credentials) Mechanism { return plainMechanism{creds: creds} }

type plainMechanism struct{ creds Credentials }

func (plainMechanism) Name() string { return Plain }

func (m plainMechanism) Start() Session { return &plainSession{creds: m.creds} }

type plainSession struct {
	creds     Credentials
	finished  bool
	principal string
}

func (s *plainSession) Step(in []byte) ([]byte, bool, error) {
	return s.StepContext(context.Background(), in)
}

// StepContext is Step, given up when ctx is done before the password check
// starts (waiting for a slot, or with a slot but too late).
func (s *plainSession) StepContext(ctx context.Context, in []byte) ([]byte, bool, error) {
	if s.finished {
		return nil, false, errFinished
	}
	s.finished = true
	authzid, user, password, ok := splitPlain(in)
	if !ok {
		return nil, false, failf("malformed PLAIN message")
	}
	cred, h, known := s.lookup(user)
	if authzid != "" && authzid != user {
		if known {
			return nil, false, failf("authorization id %q differs from user %q", authzid, user)
		}
		// Neither name quoted: both are client-typed text.
		return nil, false, failf("the authorization id differs from the name of %s", userRef(false, user))
	}
	select {
	case plainSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, false, errPlainGivenUp
	}
	if ctx.Err() != nil {
		<-plainSlots
		return nil, false, errPlainGivenUp
	}
	match := plainMatches(h, password, cred)
	if !match {
		// The credential may have been made from the password after
		// SASLprep (a client that prepares passwords, or cohort before
		// it stopped): for a password SASLprep changes, try that form.
		// Also for an unknown user (its fake credential), so that the
		// time taken does not tell known users apart.
		if prepared, ok := preparedPassword(password); ok {
			match = plainMatches(h, prepared, cred)
		}
	}
	<-plainSlots
	switch {
	case !known:
		return nil, false, unknownUser(user)
	case !match:
		return nil, false, failf("invalid password for user %q", user)
	}
	s.principal = userPrincipal(user)
	return nil, true, nil
}

// errPlainGivenUp ends a PLAIN exchange whose password was never checked:
// the client hung up or its authentication time ran out while it waited.
var errPlainGivenUp = failf("the password check was given up: the client left or its authentication time ran out")

// plainSlots bounds the PLAIN password checks running at once to half the
// cores (at least one). Each is a PBKDF2 of the stored iteration count
// (milliseconds of CPU: BenchmarkPlainCheck), and anyone who can
// reach a SASL listener can ask for them: unbounded, 200 connections
// guessing passwords kept both cores of a node busy. Bounded, a flood of
// guesses waits for a slot while the rest of the node keeps its CPU; a
// waiting check is dropped when its client hangs up or its authentication
// timeout passes (StepContext), so guesses from clients that left do not
// hold everyone else's logins back. SCRAM needs no such bound: its server
// side does no PBKDF2 (the client does).
var plainSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// testHookPBKDF2, if set, runs in a PLAIN check's slot (tests).
var testHookPBKDF2 func()

// lookup returns the credential to check user's password against:
// SCRAM-SHA-512's if usable, else SCRAM-SHA-256's, else a fake one (known
// is then false).
func (s *plainSession) lookup(user string) (cred Credential, h scramHash, known bool) {
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		c, ok := s.creds.Lookup(user, mech)
		if !ok || c.Mechanism != mech {
			continue
		}
		if h, err := c.validate(); err == nil {
			return c, h, true
		}
	}
	return fakeCredential(s.creds, ScramSHA512, hashSHA512, user), hashSHA512, false
}

func (s *plainSession) Principal() string { return s.principal }

// Expiry is zero: passwords do not expire.
func (s *plainSession) Expiry() time.Time { return time.Time{} }

// splitPlain splits "authzid NUL authcid NUL passwd": exactly two NULs,
// valid UTF-8, authcid and passwd not empty.
func splitPlain(in []byte) (authzid, user, password string, ok bool) {
	if len(in) > maxPlainMessage || !utf8.Valid(in) {
		return "", "", "", false
	}
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 || len(parts[2]) == 0 {
		return "", "", "", false
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), true
}

// plainMatches derives password's StoredKey with cred's salt and iterations
// and compares it with cred's in constant time.
func plainMatches(h scramHash, password string, cred Credential) bool {
	if testHookPBKDF2 != nil {
		testHookPBKDF2()
	}
	salted, err := saltPassword(h, password, cred.Salt, cred.Iterations)
	if err != nil {
		return false
	}
	stored, server := deriveKeys(h, salted)
	clear(salted)
	clear(server)
	return subtle.ConstantTimeCompare(stored, cred.StoredKey) == 1
}

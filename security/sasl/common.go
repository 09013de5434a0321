package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
	"unicode/utf8"
)

// userPrincipal is the principal of an authenticated user, as Kafka's
// default principal builder names it.
func userPrincipal(user string) string { return "User:" + user }

// failf returns an authentication failure wrapping ErrAuthFailed. The
// reason is for the server's log: callers quote client-supplied names
// with %q and never pass a proof, password, key or token.
func failf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrAuthFailed}, args...)...)
}

// MaxLogText is the most of a client-chosen string (a client id, a SASL
// mechanism name, a token's key id) a log line or failure reason quotes.
// Such strings may hold tens of KiB, and some are logged before the client
// has authenticated: the burst limits bound how many of those lines a client
// makes, and this bounds how large each one is.
const MaxLogText = 256

// LogText is s for a log line: whole when it is at most MaxLogText bytes,
// otherwise its start (cut at a character boundary) and its length.
func LogText(s string) string {
	if len(s) <= MaxLogText {
		return s
	}
	n := MaxLogText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:n], len(s))
}

// unknownUser is the failure of a user the store does not know. It does not
// quote the name, which is whatever the client sent: a password typed into
// the user field would otherwise reach the log. The name's length and the
// first 8 hex digits of its SHA-256 tell repeated attempts of one name apart,
// and an operator can compute them for a name they suspect (printf %s NAME |
// sha256sum).
func unknownUser(name string) error {
	return failf("unknown %s", userRef(false, name))
}

// userRef names a user in a failure reason: quoted when the store knows it,
// otherwise withheld as unknownUser says. Every reason that names a user the
// client sent goes through it, also those decided before or without the
// lookup's answer.
func userRef(known bool, name string) string {
	if known {
		return fmt.Sprintf("user %q", name)
	}
	sum := sha256.Sum256([]byte(name))
	return fmt.Sprintf("user (name withheld: %d bytes, sha256 %x...)", len(name), sum[:4])
}

// errFinished is returned by Step once a session has succeeded or failed:
// a session authenticates at most once.
var errFinished = failf("the SASL exchange is already finished")

// decodeSASLName decodes RFC 5802's saslname: "=2C" stands for "," and
// "=3D" for "="; any other "=", a raw ",", a NUL, invalid UTF-8 or an empty
// name is malformed. Kafka accepts only ASCII names here; cohort accepts
// any UTF-8, which lets the same names work in SCRAM, PLAIN and
// OAUTHBEARER.
func decodeSASLName(s string) (string, bool) {
	if s == "" || !utf8.ValidString(s) || strings.ContainsAny(s, ",\x00") {
		return "", false
	}
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// nameField decodes a "key=saslname" field.
func nameField(field, key string) (string, bool) {
	v, ok := strings.CutPrefix(field, key+"=")
	if !ok {
		return "", false
	}
	return decodeSASLName(v)
}

// fakeKey keys the credentials that stand in for unknown users when the
// Credentials do not provide a key of their own (UnknownUsers). It is drawn
// once per process: an unknown user gets the same salt every time within a
// process, as a real user does, though a new one after a restart.
var fakeKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("sasl: no randomness for the fake credential key: " + err.Error())
	}
	return k
}()

// UnknownUsers may be implemented by Credentials to shape the credential
// made up for a user they do not know, so that it looks like their real
// ones: an exchange for an unknown user then shows the client what one for
// a known user would (the salt, its length, the iteration count) and fails
// only at the proof, as a wrong password does.
type UnknownUsers interface {
	// UnknownUser returns the secret key that derives the made-up
	// credentials of mechanism (at least 16 bytes; shorter: the process's
	// own key, which changes on a restart), and the iteration count and
	// salt length to give them (out of range: DefaultIterations and
	// cohort's salt length).
	// The same store must return the same key on every node and after
	// restarts, and the typical parameters of its stored credentials.
	UnknownUser(mechanism string) (key []byte, iterations, saltLength int)
}

// fakeCredential returns a credential for a user the store does not know,
// so that an exchange for an unknown user shows the client a plausible
// salt and iteration count and costs the server the same work as one for
// a known user. Its keys are secret (keyed by the store's key or fakeKey)
// and unrelated to its salt, and the sessions fail an unknown user whatever
// the client sends.
func fakeCredential(creds Credentials, mechanism string, h scramHash, user string) Credential {
	key, iterations, sl := fakeKey, DefaultIterations, saltLen
	if u, ok := creds.(UnknownUsers); ok {
		k, i, n := u.UnknownUser(mechanism)
		if len(k) >= 16 {
			key = k
		}
		if checkIterations(i) == nil {
			iterations = i
		}
		if n >= 8 && n <= 64 {
			sl = n
		}
	}
	derive := func(label string, n int) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(label + "\x00" + mechanism + "\x00" + user))
		out := m.Sum(nil)
		for len(out) < n {
			m.Write(out[len(out)-sha256.Size:])
			out = m.Sum(out)
		}
		return out[:n]
	}
	return Credential{
		Mechanism:  mechanism,
		Salt:       derive("salt", sl),
		Iterations: iterations,
		StoredKey:  derive("stored", h.size),
		ServerKey:  derive("server", h.size),
	}
}

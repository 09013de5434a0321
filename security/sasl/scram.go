package sasl

import (
	"crypto/hmac"
	"encoding/base64"
	"strings"
	"time"

	"github.com/xdg-go/scram"
)

// maxSCRAMMessage bounds a SCRAM client message; real ones are a few
// hundred bytes.
const maxSCRAMMessage = 4096

// NewSCRAM returns the server side of SCRAM-SHA-256 or SCRAM-SHA-512 (RFC
// 5802, RFC 7677) over the stored credentials, with Kafka's rules:
//
//   - the client-first message must use the GS2 flag "n" (no channel
//     binding, as Kafka's ScramMessages), and may carry extensions after
//     the nonce; unknown extensions are ignored as Kafka does, but
//     tokenauth=true (delegation token authentication) fails, since cohort
//     has no delegation tokens. A reserved "m=" extension fails (RFC 5802).
//   - an authorization id, if present, must equal the user name.
//   - an unknown user is not rejected at the first message: the session
//     answers with a fake salt and carries on, and fails at the proof, so
//     that neither the answer nor its timing tells which users exist.
//   - a stored credential outside the iteration bounds, or otherwise
//     unusable, fails the exchange.
//
// The exchange takes two Steps: the client-first message (the answer is
// the server-first message) and the client-final message (the answer is
// the server-final "v=..." message, with done true). Failures return no
// "e=" message: like Kafka, the server answers with an error code.
func NewSCRAM(mechanism string, creds Credentials) (Mechanism, error) {
	h, err := hashFor(mechanism)
	if err != nil {
		return nil, err
	}
	return &scramMechanism{name: mechanism, h: h, creds: creds}, nil
}

type scramMechanism struct {
	name  string
	h     scramHash
	creds Credentials
}

func (m *scramMechanism) Name() string { return m.name }

func (m *scramMechanism) Start() Session { return &scramSession{m: m} }

type scramState int

const (
	scramFirst scramState = iota
	scramFinal
	scramFinished
)

// scramSession drives one xdg-go/scram server conversation. Our own
// strict parsing runs before each of the library's steps: the library
// indexes fields without checking them (an empty GS2 flag or a proof
// longer than the hash would panic), and Kafka's rules need the
// extensions and the decoded names, which it does not expose.
type scramSession struct {
	m         *scramMechanism
	state     scramState
	conv      *scram.ServerConversation
	user      string
	unknown   bool
	principal string
	// For the legacy nonce (see legacyFinal): the client-first-bare and
	// server-first messages, the client's nonce and the credential.
	clientFirstBare, serverFirst, clientNonce string
	gs2                                       string // the GS2 header the client sent
	cred                                      Credential
}

func (s *scramSession) Step(in []byte) (out []byte, done bool, err error) {
	switch s.state {
	case scramFirst:
		out, err = s.first(in)
		if err != nil {
			s.finish()
			return nil, false, err
		}
		s.state = scramFinal
		return out, false, nil
	case scramFinal:
		out, err = s.final(in)
		s.finish()
		if err != nil {
			return nil, false, err
		}
		s.principal = userPrincipal(s.user)
		return out, true, nil
	}
	return nil, false, errFinished
}

// finish ends the session and drops the credential.
func (s *scramSession) finish() {
	s.state = scramFinished
	s.conv = nil
}

func (s *scramSession) Principal() string { return s.principal }

// Expiry is zero: SCRAM credentials do not expire (no delegation tokens).
func (s *scramSession) Expiry() time.Time { return time.Time{} }

func (s *scramSession) first(in []byte) ([]byte, error) {
	msg, err := parseClientFirst(in)
	if err != nil {
		return nil, failf("malformed %s client-first message: %v", s.m.name, err)
	}
	s.user = msg.user
	cred, known := s.m.creds.Lookup(msg.user, s.m.name)
	if v, ok := msg.extensions["tokenauth"]; ok && strings.EqualFold(v, "true") {
		return nil, failf("delegation token authentication (tokenauth) is not supported, %s", userRef(known, msg.user))
	}
	if msg.authzid != "" && msg.authzid != msg.user {
		if known {
			return nil, failf("authorization id %q differs from user %q", msg.authzid, msg.user)
		}
		// Neither name quoted: both are client-typed text.
		return nil, failf("the authorization id differs from the name of %s", userRef(false, msg.user))
	}
	if !known {
		s.unknown = true
		cred = fakeCredential(s.m.creds, s.m.name, s.m.h, msg.user)
	} else if _, err := cred.validate(); err != nil || cred.Mechanism != s.m.name {
		return nil, failf("stored %s credential of user %q is unusable", s.m.name, msg.user)
	}
	stored := scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(cred.Salt), Iters: cred.Iterations},
		StoredKey:  cred.StoredKey,
		ServerKey:  cred.ServerKey,
	}
	srv, err := s.m.h.gen.NewServer(func(string) (scram.StoredCredentials, error) { return stored, nil })
	if err != nil {
		return nil, failf("%s server: %v", s.m.name, err)
	}
	s.conv = srv.NewConversation()
	// The library gets the message as the client sent it: since v1.3.0
	// it keeps the GS2 header as sent ("n,a=...,") for the client-final's
	// channel binding check and decodes the authzid itself. (v1.1.2
	// rebuilt the header without the "a=", and cohort handed it a doubled
	// "a=" to make up for that; v1.3.0 would refuse that as a malformed
	// authzid. TestSCRAMAuthzid pins this.)
	out, err := s.conv.Step(string(in))
	if err != nil {
		return nil, failf("malformed %s client-first message from %s", s.m.name, userRef(known, msg.user))
	}
	s.clientFirstBare, s.serverFirst, s.clientNonce, s.cred = msg.bare, out, msg.nonce, cred
	s.gs2 = msg.gs2
	return []byte(out), nil
}

func (s *scramSession) final(in []byte) ([]byte, error) {
	if err := checkClientFinal(in, s.m.h.size); err != nil {
		return nil, failf("malformed %s client-final message from %s: %v", s.m.name, userRef(!s.unknown, s.user), err)
	}
	if out, ok, err := s.legacyFinal(string(in)); ok {
		return out, err
	}
	out, err := s.conv.Step(string(in))
	switch {
	case s.unknown:
		return nil, s.unknownFailure()
	case err == nil && s.conv.Valid():
		return []byte(out), nil
	case out == "e=invalid-proof":
		return nil, failf("invalid proof for user %q", s.user)
	case out == "e=other-error":
		return nil, failf("nonce mismatch in the client-final message of user %q", s.user)
	case out == "e=channel-bindings-dont-match":
		return nil, failf("channel binding mismatch for user %q", s.user)
	}
	return nil, failf("client-final message of user %q rejected", s.user)
}

// unknownFailure is the failure of a user without a credential for the
// session's mechanism. A user the store knows under the other SCRAM
// mechanism is named, with the mechanism it has: a client set up for the
// wrong one (a user created with --mechanism SCRAM-SHA-512 only) is then
// not logged as an unknown user. The client's answer is the same either
// way, so this tells a client nothing about which users exist.
func (s *scramSession) unknownFailure() error {
	other := ScramSHA512
	if s.m.name == ScramSHA512 {
		other = ScramSHA256
	}
	if _, ok := s.m.creds.Lookup(s.user, other); ok {
		return failf("user %q has no %s credential, only %s (give it one with cohort user set --mechanism %s, or set the client to %s)",
			s.user, s.m.name, other, s.m.name, other)
	}
	return unknownUser(s.user)
}

// legacyFinal verifies a client-final message whose nonce is the client's
// nonce followed by the whole combined nonce, as librdkafka before 2.6.1
// sends it (it prepends its own nonce to the server's, which already starts
// with it). Kafka 3 accepted that (it only checked that the nonce ended
// with the server's), Kafka 4 refuses it; cohort accepts exactly that
// shape, so that distributions' kcat and older librdkafka clients can
// authenticate, and checks the proof as RFC 5802 says, over the message as
// the client sent it: the nonce still contains the server's fresh nonce,
// so a proof cannot be replayed. ok is false for every other message,
// which the library checks.
func (s *scramSession) legacyFinal(in string) (out []byte, ok bool, err error) {
	f := strings.Split(in, ",")
	nonce, _ := strings.CutPrefix(f[1], "r=")
	combined := serverNonce(s.serverFirst)
	if combined == "" || nonce != s.clientNonce+combined {
		return nil, false, nil
	}
	// The channel binding repeats the GS2 header, as the library checks
	// on the usual path (RFC 5802: the server must verify it).
	if f[0] != "c="+base64.StdEncoding.EncodeToString([]byte(s.gs2)) {
		return nil, true, failf("channel binding does not repeat the GS2 header for user %q", s.user)
	}
	if s.unknown {
		return nil, true, s.unknownFailure()
	}
	withoutProof := in[:strings.LastIndex(in, ",p=")]
	proof, _ := base64.StdEncoding.DecodeString(f[len(f)-1][2:])
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	clientSig := s.hmac(s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSig[i]
	}
	h := s.m.h.new()
	h.Write(clientKey)
	if !hmac.Equal(h.Sum(nil), s.cred.StoredKey) {
		return nil, true, failf("invalid proof for user %q", s.user)
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(s.hmac(s.cred.ServerKey, authMessage))), true, nil
}

func (s *scramSession) hmac(key []byte, msg string) []byte {
	m := hmac.New(s.m.h.new, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// serverNonce is the r= attribute of a server-first message.
func serverNonce(serverFirst string) string {
	for _, f := range strings.Split(serverFirst, ",") {
		if r, ok := strings.CutPrefix(f, "r="); ok {
			return r
		}
	}
	return ""
}

// clientFirst is a parsed client-first message.
type clientFirst struct {
	// bare is the message without its GS2 header; nonce is the client's.
	bare, nonce string
	// gs2 is the GS2 header as sent ("n,," or "n,a=...,"): the
	// client-final's channel binding must be its base64.
	gs2           string
	authzid, user string
	extensions    map[string]string
}

// parseClientFirst parses RFC 5802's client-first-message as Kafka's
// ScramMessages accepts it:
//
//	"n," ["a=" saslname] "," "n=" saslname ",r=" nonce *("," key "=" value)
func parseClientFirst(in []byte) (clientFirst, error) {
	var msg clientFirst
	if len(in) > maxSCRAMMessage {
		return msg, errString("too long")
	}
	f := strings.Split(string(in), ",")
	if len(f) < 4 {
		return msg, errString("too few fields")
	}
	if f[0] != "n" {
		return msg, errString("GS2 flag must be n (channel binding is not supported)")
	}
	var ok bool
	if f[1] != "" {
		if msg.authzid, ok = nameField(f[1], "a"); !ok {
			return msg, errString("bad authorization id")
		}
	}
	if strings.HasPrefix(f[2], "m=") {
		return msg, errString("mandatory extension m= is not supported")
	}
	if msg.user, ok = nameField(f[2], "n"); !ok {
		return msg, errString("bad user name")
	}
	r, ok := strings.CutPrefix(f[3], "r=")
	if !ok || !printable(r) {
		return msg, errString("bad nonce")
	}
	msg.nonce, msg.bare, msg.gs2 = r, strings.Join(f[2:], ","), f[0]+","+f[1]+","
	var err error
	if msg.extensions, err = parseExtensions(f[4:]); err != nil {
		return msg, err
	}
	return msg, nil
}

// checkClientFinal checks RFC 5802's client-final-message as Kafka's
// ScramMessages accepts it, with a proof as long as the hash:
//
//	"c=" base64 ",r=" nonce *("," key "=" value) ",p=" base64
//
// The library checks the channel binding, the nonce and the proof.
func checkClientFinal(in []byte, proofLen int) error {
	if len(in) > maxSCRAMMessage {
		return errString("too long")
	}
	f := strings.Split(string(in), ",")
	if len(f) < 3 {
		return errString("too few fields")
	}
	if c, ok := strings.CutPrefix(f[0], "c="); !ok || !isBase64(c) {
		return errString("bad channel binding")
	}
	if r, ok := strings.CutPrefix(f[1], "r="); !ok || !printable(r) {
		return errString("bad nonce")
	}
	if _, err := parseExtensions(f[2 : len(f)-1]); err != nil {
		return err
	}
	p, ok := strings.CutPrefix(f[len(f)-1], "p=")
	if !ok {
		return errString("no proof")
	}
	proof, err := base64.StdEncoding.DecodeString(p)
	if err != nil || len(proof) != proofLen {
		return errString("bad proof")
	}
	return nil
}

// parseExtensions parses SCRAM extensions key=value, where the key is
// letters and the value any ASCII but NUL and ",", as in Kafka's
// ScramMessages. A repeated key is malformed.
func parseExtensions(fields []string) (map[string]string, error) {
	ext := make(map[string]string, len(fields))
	for _, kv := range fields {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !letters(k) || v == "" || !asciiNoNUL(v) {
			return nil, errString("bad extension")
		}
		if _, dup := ext[k]; dup {
			return nil, errString("repeated extension")
		}
		ext[k] = v
	}
	return ext, nil
}

func isBase64(s string) bool {
	_, err := base64.StdEncoding.DecodeString(s)
	return s != "" && err == nil
}

// printable is RFC 5802's nonce alphabet: %x21-7E except ",".
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return s != ""
}

func letters(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return s != ""
}

func asciiNoNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 || s[i] > 0x7f {
			return false
		}
	}
	return true
}

// errString is a parse error whose text is safe to log.
type errString string

func (e errString) Error() string { return string(e) }

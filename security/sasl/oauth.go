package sasl

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// maxOAuthMessage bounds the OAUTHBEARER client message, token included.
const maxOAuthMessage = 64 << 10

// defaultClockSkew is OAuthConfig.ClockSkew's default, Kafka's
// sasl.oauthbearer.clock.skew.seconds default.
const defaultClockSkew = 30 * time.Second

// invalidTokenJSON is RFC 7628's error message for a token that does not
// verify.
var invalidTokenJSON = []byte(`{"status":"invalid_token"}`)

// signatureAlgs are the JWS algorithms a token may use: RSA and ECDSA
// signatures. "none" and the HMAC algorithms are refused when the token is
// parsed, so a token can never be checked with a public key used as an
// HMAC secret.
var signatureAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
}

// OAuthConfig configures the OAUTHBEARER mechanism (Kafka's
// sasl.oauthbearer.* broker settings, with the keys read from a file
// rather than fetched from a URL).
type OAuthConfig struct {
	// JWKSFile is the path of the JWK set (RFC 7517) whose keys verify
	// tokens. Required. It is reread when it changes.
	JWKSFile string
	// Issuer, if set, must equal the token's "iss" claim.
	Issuer string
	// Audience, if set, must be one of the token's "aud" values.
	Audience string
	// PrincipalClaim names the claim that holds the user name; "sub" if
	// empty. Its value must be a non-empty string.
	PrincipalClaim string
	// Now tells the time tokens are checked at; time.Now if nil.
	Now func() time.Time
	// ClockSkew is how far "exp", "nbf" and "iat" may be off; 30s if
	// zero, and it may not be negative.
	ClockSkew time.Duration
}

// Reloader is implemented by the Mechanism NewOAuthBearer returns.
// Reload looks at the JWKS file at once (Start does so by itself at most
// once a second), rereads it if its size or modification time changed,
// and returns why the file on disk could not be loaded, or nil when the
// keys in use are the file's. A bad file never replaces good keys, so a
// server may call Reload (on a timer or a signal) just to log the error.
type Reloader interface {
	Reload() error
}

// NewOAuthBearer returns the server side of OAUTHBEARER (RFC 7628,
// KIP-255): the client sends a JWS-compact JWT, verified against the keys
// of cfg.JWKSFile (RS*, PS* and ES* algorithms; the token's "kid" picks
// the key, and a token without "kid" may match any key; a key whose JWK
// "alg" is set verifies that algorithm only). The token must carry "exp",
// and "exp", "nbf" and "iat" must hold at cfg.Now within cfg.ClockSkew
// (Kafka also requires "iat"; cohort checks it only when present). The
// principal is "User:" + the PrincipalClaim claim, and Expiry is "exp".
//
// The client message is the GS2 header "n,," or "n,a=authzid," (the
// authzid must then equal the principal's user name), then
// "\x01auth=Bearer <token>\x01", optional key=value extensions each
// followed by "\x01" (accepted and ignored, as Kafka's default validator
// does), and a final "\x01". Anything else fails without a message.
//
// A token that does not verify fails the Step with RFC 7628's error
// message {"status":"invalid_token"} in out. Kafka sends it as a
// challenge, waits for the client's "\x01" and then fails the
// SaslAuthenticate; a server may do the same (a Step of "\x01" after that
// failure returns the same error again), or answer the first
// SaslAuthenticate with SASL_AUTHENTICATION_FAILED at once, which clients
// handle as well.
//
// NewOAuthBearer fails if JWKSFile is empty, ClockSkew negative or the
// JWKS file does not load. The Mechanism also implements Reloader.
func NewOAuthBearer(cfg OAuthConfig) (Mechanism, error) {
	if cfg.JWKSFile == "" {
		return nil, errors.New("sasl: OAUTHBEARER needs a JWKS file")
	}
	if cfg.ClockSkew < 0 {
		return nil, errors.New("sasl: OAUTHBEARER clock skew is negative")
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = defaultClockSkew
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = "sub"
	}
	keys, err := loadJWKS(cfg.JWKSFile, cfg.Now)
	if err != nil {
		return nil, err
	}
	return &oauthMechanism{cfg: cfg, keys: keys}, nil
}

type oauthMechanism struct {
	cfg  OAuthConfig
	keys *jwksFile
}

func (m *oauthMechanism) Name() string { return OAuthBearer }

func (m *oauthMechanism) Start() Session {
	m.keys.maybeReload()
	return &oauthSession{m: m}
}

func (m *oauthMechanism) Reload() error { return m.keys.reload() }

type oauthSession struct {
	m         *oauthMechanism
	finished  bool
	failure   error // why the exchange failed, if it did
	principal string
	expiry    time.Time
}

func (s *oauthSession) Step(in []byte) ([]byte, bool, error) {
	if s.finished {
		if s.failure != nil && len(in) == 1 && in[0] == 0x01 {
			return nil, false, s.failure
		}
		return nil, false, errFinished
	}
	s.finished = true
	authzid, token, err := parseOAuthInitial(in)
	if err != nil {
		s.failure = failf("malformed OAUTHBEARER client message: %v", err)
		return nil, false, s.failure
	}
	user, exp, err := s.m.verify(token)
	if err != nil {
		s.failure = failf("invalid OAUTHBEARER token: %v", err)
		return invalidTokenJSON, false, s.failure
	}
	if authzid != "" && authzid != user {
		s.failure = failf("authorization id %q differs from the token's user %q", authzid, user)
		return nil, false, s.failure
	}
	s.principal, s.expiry = userPrincipal(user), exp
	return nil, true, nil
}

func (s *oauthSession) Principal() string { return s.principal }

func (s *oauthSession) Expiry() time.Time { return s.expiry }

// verify checks token's signature and claims and returns its user name
// and expiry. Its errors name what failed, never the token.
func (m *oauthMechanism) verify(token string) (string, time.Time, error) {
	tok, err := jwt.ParseSigned(token, signatureAlgs)
	if err != nil || len(tok.Headers) != 1 {
		return "", time.Time{}, errors.New("not a JWS-compact JWT signed with an RSA or EC algorithm")
	}
	hdr := tok.Headers[0]
	payload, err := m.verifySignature(tok, hdr)
	if err != nil {
		return "", time.Time{}, err
	}
	if err := strictClaimNames(payload, m.cfg.PrincipalClaim); err != nil {
		return "", time.Time{}, err
	}
	var std jwt.Claims
	var all map[string]any
	if json.Unmarshal(payload, &std) != nil || json.Unmarshal(payload, &all) != nil {
		return "", time.Time{}, errors.New("malformed claims")
	}
	if std.Expiry == nil {
		return "", time.Time{}, errors.New("no exp claim")
	}
	now := m.cfg.Now()
	expected := jwt.Expected{Issuer: m.cfg.Issuer, Time: now}
	if m.cfg.Audience != "" {
		expected.AnyAudience = jwt.Audience{m.cfg.Audience}
	}
	if err := std.ValidateWithLeeway(expected, m.cfg.ClockSkew); err != nil {
		return "", time.Time{}, claimError(err, &std, now, m.cfg.ClockSkew)
	}
	name, _ := all[m.cfg.PrincipalClaim].(string)
	// Kafka trims the subject and refuses a blank one.
	if name = strings.TrimSpace(name); name == "" {
		return "", time.Time{}, fmt.Errorf("no non-empty string claim %q", m.cfg.PrincipalClaim)
	}
	return name, std.Expiry.Time(), nil
}

// checkedClaims are the claims verify reads through jwt.Claims.
var checkedClaims = []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti"}

// strictClaimNames refuses a claims set that names a claim twice, or that
// names a claim verify checks (or the principal claim) in another case.
// Go's JSON decoder matches struct fields ignoring case and keeps the last
// of repeated names, so {"aud":"other","AUD":"cohort"} passed the audience
// check and {"sub":"alice","sub":"admin"} logged in as admin; JWT (RFC 7519,
// section 4) lets a parser refuse repeated names, and Kafka's refuses both.
func strictClaimNames(payload []byte, principalClaim string) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("malformed claims")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errors.New("malformed claims")
		}
		name, _ := tok.(string)
		if seen[name] {
			return fmt.Errorf("the claim %q appears twice", name)
		}
		seen[name] = true
		for _, c := range append(checkedClaims, principalClaim) {
			if name != c && strings.EqualFold(name, c) {
				return fmt.Errorf("a claim %q, which differs from %q only in case", name, c)
			}
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return errors.New("malformed claims")
		}
	}
	return nil
}

// verifySignature returns the payload of tok once one of the keys
// verifies it: the keys with the token's kid, or all keys if it has none.
func (m *oauthMechanism) verifySignature(tok *jwt.JSONWebToken, hdr jose.Header) ([]byte, error) {
	tried := false
	for _, k := range m.keys.current() {
		if hdr.KeyID != "" && k.kid != hdr.KeyID {
			continue
		}
		tried = true
		if (k.alg != "" && k.alg != hdr.Algorithm) || !keyFits(k, hdr.Algorithm) {
			continue
		}
		var payload json.RawMessage
		if tok.Claims(k.key, &payload) == nil {
			return payload, nil
		}
	}
	var err error
	if !tried {
		err = fmt.Errorf("no key with kid %q", LogText(hdr.KeyID))
	} else {
		err = fmt.Errorf("signature (%s, kid %q) not verified by the JWKS keys", hdr.Algorithm, LogText(hdr.KeyID))
	}
	// A key rotation whose new file does not load shows up here first:
	// say so, or the operator sees only tokens failing.
	if ferr := m.keys.fileErr(); ferr != nil {
		err = fmt.Errorf("%w; the keys in use are the last good ones, because %w", err, ferr)
	}
	return nil, err
}

// keyFits tells whether alg is an algorithm of k's key type.
func keyFits(k verifyKey, alg string) bool {
	switch k.key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return strings.HasPrefix(alg, "ES")
	}
	return false
}

// claimError words go-jose's claim validation errors of std, checked at
// now with skew. A time claim's error gives the claim's time and how far it
// is from now: hours mean a clock that is off (the token issuer's, the
// client's if it makes its own tokens, or the node's), seconds a token that
// merely ran out.
func claimError(err error, std *jwt.Claims, now time.Time, skew time.Duration) error {
	off := func(what, claim string, at *jwt.NumericDate) error {
		t := at.Time().UTC()
		d, rel := t.Sub(now), "after"
		if d < 0 {
			d, rel = -d, "before"
		}
		return fmt.Errorf("%s (%s %s, %v %s the node's clock; %v of clock skew allowed)",
			what, claim, t.Format(time.RFC3339), d.Round(time.Second), rel, skew)
	}
	switch {
	case errors.Is(err, jwt.ErrExpired) && std.Expiry != nil:
		return off("expired", "exp", std.Expiry)
	case errors.Is(err, jwt.ErrNotValidYet) && std.NotBefore != nil:
		return off("not valid yet", "nbf", std.NotBefore)
	case errors.Is(err, jwt.ErrIssuedInTheFuture) && std.IssuedAt != nil:
		return off("issued in the future", "iat", std.IssuedAt)
	case errors.Is(err, jwt.ErrExpired):
		return errors.New("expired (exp)")
	case errors.Is(err, jwt.ErrNotValidYet):
		return errors.New("not valid yet (nbf)")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return errors.New("issued in the future (iat)")
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return errors.New("wrong issuer (iss)")
	case errors.Is(err, jwt.ErrInvalidAudience):
		return errors.New("wrong audience (aud)")
	}
	return errors.New("claims rejected")
}

// parseOAuthInitial parses RFC 7628's client initial response:
//
//	"n," ["a=" saslname] "," 0x01 *(key "=" value 0x01) 0x01
//
// where one key is "auth" with the value "Bearer <b64token>" (scheme case
// insensitive, RFC 6750 token syntax), keys are letters and values
// %x21-7E, space, tab, CR and LF (Kafka's OAuthBearerClientInitialResponse).
// A repeated key is malformed.
func parseOAuthInitial(in []byte) (authzid, token string, err error) {
	if len(in) > maxOAuthMessage {
		return "", "", errString("too long")
	}
	rest, ok := bytes.CutPrefix(in, []byte("n,"))
	if !ok {
		return "", "", errString("GS2 header must start with n,")
	}
	i := bytes.IndexByte(rest, ',')
	if i < 0 {
		return "", "", errString("GS2 header not terminated")
	}
	if i > 0 {
		if authzid, ok = nameField(string(rest[:i]), "a"); !ok {
			return "", "", errString("bad authorization id")
		}
	}
	body := rest[i+1:]
	if len(body) < 3 || body[0] != 0x01 || !bytes.HasSuffix(body, []byte{0x01, 0x01}) {
		return "", "", errString("kvpairs not framed by 0x01")
	}
	pairs := map[string]string{}
	for _, kv := range bytes.Split(body[1:len(body)-2], []byte{0x01}) {
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok || !letters(string(k)) || !kvValue(v) {
			return "", "", errString("bad kvpair")
		}
		if _, dup := pairs[string(k)]; dup {
			return "", "", errString("repeated key")
		}
		pairs[string(k)] = string(v)
	}
	auth, ok := pairs["auth"]
	if !ok {
		return "", "", errString("no auth kvpair")
	}
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", "", errString("auth scheme is not Bearer")
	}
	if token = strings.TrimLeft(token, " "); !b64token(token) {
		return "", "", errString("bad bearer token syntax")
	}
	return authzid, token, nil
}

func kvValue(v []byte) bool {
	for _, c := range v {
		if (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return len(v) > 0
}

// b64token is RFC 6750's token68-like syntax:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func b64token(s string) bool {
	body := strings.TrimRight(s, "=")
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return body != ""
}

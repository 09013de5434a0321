package sasl

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

var (
	testKeysOnce sync.Once
	rsaKey       *rsa.PrivateKey
	rsaKey2      *rsa.PrivateKey
	ecKey        *ecdsa.PrivateKey
)

// testKeys generates the keys once per test binary: RSA generation is
// the slowest step of these tests.
func testKeys(t testing.TB) {
	testKeysOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if rsaKey2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	})
}

// oauthFixture is a JWKS file, a clock and the mechanism reading both.
type oauthFixture struct {
	t     testing.TB
	path  string
	now   time.Time
	mtime time.Time
	m     Mechanism
}

var t0 = time.Unix(1_700_000_000, 0)

func newOAuthFixture(t testing.TB, cfg OAuthConfig, keys ...jose.JSONWebKey) *oauthFixture {
	t.Helper()
	testKeys(t)
	f := &oauthFixture{t: t, path: filepath.Join(t.TempDir(), "jwks.json"), now: t0, mtime: t0}
	f.writeJWKS(keys...)
	cfg.JWKSFile = f.path
	cfg.Now = func() time.Time { return f.now }
	m, err := NewOAuthBearer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

// writeRaw rewrites the JWKS file and moves its mtime forward, so the
// change shows whatever the file system's mtime granularity.
func (f *oauthFixture) writeRaw(data []byte) {
	f.t.Helper()
	if err := os.WriteFile(f.path, data, 0o600); err != nil {
		f.t.Fatal(err)
	}
	f.mtime = f.mtime.Add(time.Second)
	if err := os.Chtimes(f.path, f.mtime, f.mtime); err != nil {
		f.t.Fatal(err)
	}
}

func (f *oauthFixture) writeJWKS(keys ...jose.JSONWebKey) {
	f.t.Helper()
	data, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		f.t.Fatal(err)
	}
	f.writeRaw(data)
}

func pub(key any, kid string) jose.JSONWebKey {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Use: "sig"}
	case *ecdsa.PrivateKey:
		return jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Use: "sig"}
	}
	panic("key type")
}

// sign returns a JWS-compact JWT of claims; kid "" leaves the header out.
func sign(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// handmade builds a token from a header and claims, with signature sig
// over the signing input.
func handmade(header, claims map[string]any, sig func(input string) []byte) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(claims)
	return input + "." + base64.RawURLEncoding.EncodeToString(sig(input))
}

func claims(extra ...any) map[string]any {
	c := map[string]any{"sub": "alice", "exp": t0.Add(time.Hour).Unix(), "iat": t0.Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == nil {
			delete(c, extra[i].(string))
		} else {
			c[extra[i].(string)] = extra[i+1]
		}
	}
	return c
}

func initial(token string) []byte { return []byte("n,,\x01auth=Bearer " + token + "\x01\x01") }

func (f *oauthFixture) step(msg []byte) (Session, []byte, bool, error) {
	s := f.m.Start()
	out, done, err := s.Step(msg)
	return s, out, done, err
}

func (f *oauthFixture) wantOK(token string, principal string) Session {
	f.t.Helper()
	s, out, done, err := f.step(initial(token))
	if err != nil || !done || len(out) != 0 {
		f.t.Fatalf("out %q, done %v, err %v", out, done, err)
	}
	if s.Principal() != principal {
		f.t.Errorf("principal %q, want %q", s.Principal(), principal)
	}
	return s
}

// wantInvalid checks the token fails as invalid_token with reason.
func (f *oauthFixture) wantInvalid(t *testing.T, token, reason string) {
	t.Helper()
	s, out, done, err := f.step(initial(token))
	if done || string(out) != `{"status":"invalid_token"}` {
		t.Errorf("out %q, done %v", out, done)
	}
	wantFailure(t, err, reason, token)
	if s.Principal() != "" {
		t.Errorf("principal %q after failure", s.Principal())
	}
	// RFC 7628: the client acknowledges the error with 0x01.
	if _, _, err2 := s.Step([]byte{0x01}); err2 != err {
		t.Errorf("0x01 after the failure: %v, want %v", err2, err)
	}
}

func bothKeys() []jose.JSONWebKey {
	return []jose.JSONWebKey{pub(rsaKey, "rsa1"), pub(ecKey, "ec1")}
}

func TestOAuthSuccess(t *testing.T) {
	testKeys(t)
	f := newOAuthFixture(t, OAuthConfig{Issuer: "https://idp", Audience: "cohort"}, bothKeys()...)
	if f.m.Name() != "OAUTHBEARER" {
		t.Errorf("Name() = %q", f.m.Name())
	}
	c := claims("iss", "https://idp", "aud", []string{"other", "cohort"})
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"RS256 with kid", sign(t, jose.RS256, rsaKey, "rsa1", c)},
		{"PS512 with kid", sign(t, jose.PS512, rsaKey, "rsa1", c)},
		{"ES256 with kid", sign(t, jose.ES256, ecKey, "ec1", c)},
		{"ES256 without kid", sign(t, jose.ES256, ecKey, "", c)},
		{"RS384 without kid", sign(t, jose.RS384, rsaKey, "", c)},
		{"aud as a string", sign(t, jose.RS256, rsaKey, "rsa1", claims("iss", "https://idp", "aud", "cohort"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := f.wantOK(tc.token, "User:alice")
			if !s.Expiry().Equal(t0.Add(time.Hour)) {
				t.Errorf("expiry %v", s.Expiry())
			}
			if _, _, err := s.Step(initial(tc.token)); !errors.Is(err, errFinished) {
				t.Errorf("Step after success: %v", err)
			}
		})
	}
	// An authzid equal to the user name, and extensions.
	tok := sign(t, jose.RS256, rsaKey, "rsa1", c)
	_, _, done, err := f.step([]byte("n,a=alice,\x01auth=Bearer " + tok + "\x01traceid=x y\x01\x01"))
	if err != nil || !done {
		t.Errorf("authzid and extension: %v", err)
	}
	// Lower-case scheme, as Kafka accepts.
	if _, _, _, err := f.step([]byte("n,,\x01auth=bearer " + tok + "\x01\x01")); err != nil {
		t.Errorf("lower-case scheme: %v", err)
	}
}

func TestOAuthClaims(t *testing.T) {
	testKeys(t)
	f := newOAuthFixture(t, OAuthConfig{Issuer: "https://idp", Audience: "cohort"}, bothKeys()...)
	good := func(extra ...any) string {
		return sign(t, jose.RS256, rsaKey, "rsa1", claims(append([]any{"iss", "https://idp", "aud", "cohort"}, extra...)...))
	}
	// Within the default 30s of skew.
	f.wantOK(good("exp", t0.Add(-29*time.Second).Unix()), "User:alice")
	f.wantOK(good("nbf", t0.Add(29*time.Second).Unix()), "User:alice")
	for _, tc := range []struct{ name, token, reason string }{
		{"expired", good("exp", t0.Add(-31*time.Second).Unix()), "expired (exp "},
		{"not yet valid", good("nbf", t0.Add(time.Minute).Unix()), "not valid yet (nbf "},
		{"issued in the future", good("iat", t0.Add(time.Minute).Unix()), "issued in the future (iat "},
		{"no exp", good("exp", nil), "no exp claim"},
		{"exp not a number", good("exp", "tomorrow"), "malformed claims"},
		{"wrong issuer", good("iss", "https://evil"), "wrong issuer (iss)"},
		{"no issuer", good("iss", nil), "wrong issuer (iss)"},
		{"wrong audience", good("aud", []string{"kafka", "other"}), "wrong audience (aud)"},
		{"no sub", good("sub", nil), `no non-empty string claim "sub"`},
		{"blank sub", good("sub", "  "), `no non-empty string claim "sub"`},
		{"sub not a string", good("sub", 42), "malformed claims"},
	} {
		t.Run(tc.name, func(t *testing.T) { f.wantInvalid(t, tc.token, tc.reason) })
	}
	// Time moves: the good token expires.
	tok := good()
	f.wantOK(tok, "User:alice")
	f.now = t0.Add(time.Hour + 31*time.Second)
	t.Run("later", func(t *testing.T) { f.wantInvalid(t, tok, "expired") })
}

func TestOAuthPrincipalClaimAndSkew(t *testing.T) {
	testKeys(t)
	f := newOAuthFixture(t, OAuthConfig{PrincipalClaim: "email", ClockSkew: 5 * time.Second}, pub(ecKey, "ec1"))
	f.wantOK(sign(t, jose.ES256, ecKey, "ec1", claims("email", "al@example.com")), "User:al@example.com")
	t.Run("no email", func(t *testing.T) {
		f.wantInvalid(t, sign(t, jose.ES256, ecKey, "ec1", claims()), `no non-empty string claim "email"`)
	})
	t.Run("email not a string", func(t *testing.T) {
		f.wantInvalid(t, sign(t, jose.ES256, ecKey, "ec1", claims("email", 42)), `no non-empty string claim "email"`)
	})
	t.Run("beyond 5s", func(t *testing.T) {
		f.wantInvalid(t, sign(t, jose.ES256, ecKey, "ec1", claims("email", "x", "exp", t0.Add(-6*time.Second).Unix())), "expired")
	})
	// No issuer or audience configured: none is required.
	f.wantOK(sign(t, jose.ES256, ecKey, "ec1", claims("email", "x", "iss", "anyone", "aud", "anything")), "User:x")
}

func TestOAuthSignatures(t *testing.T) {
	testKeys(t)
	jwkWithAlg := pub(rsaKey2, "rsa2")
	jwkWithAlg.Algorithm = "RS256"
	f := newOAuthFixture(t, OAuthConfig{}, pub(rsaKey, "rsa1"), pub(ecKey, "ec1"), jwkWithAlg)
	c := claims()
	pubDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	hs256 := func(key []byte) func(string) []byte {
		return func(in string) []byte {
			m := hmac.New(sha256.New, key)
			m.Write([]byte(in))
			return m.Sum(nil)
		}
	}
	rsaJWK, _ := json.Marshal(pub(rsaKey, "rsa1"))
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct{ name, token, reason string }{
		{"unknown kid", sign(t, jose.RS256, rsaKey, "nope", c), `no key with kid "nope"`},
		{"wrong key for kid", sign(t, jose.ES256, other, "ec1", c), "not verified"},
		{"unknown key, no kid", sign(t, jose.ES256, other, "", c), "not verified"},
		{"RSA key named as the EC kid", sign(t, jose.RS256, rsaKey, "ec1", c), "not verified"},
		{"alg other than the JWK's", sign(t, jose.PS256, rsaKey2, "rsa2", c), "not verified"},
		{"alg none", handmade(map[string]any{"alg": "none", "kid": "rsa1"}, c, func(string) []byte { return nil }), "not a JWS-compact JWT"},
		{"HS256 keyed with the public key", handmade(map[string]any{"alg": "HS256", "kid": "rsa1"}, c, hs256(pubDER)), "not a JWS-compact JWT"},
		{"HS256 keyed with the JWK", handmade(map[string]any{"alg": "HS256"}, c, hs256(rsaJWK)), "not a JWS-compact JWT"},
		{"tampered claims", func() string {
			p := strings.Split(sign(t, jose.RS256, rsaKey, "rsa1", c), ".")
			b, _ := json.Marshal(claims("sub", "admin"))
			return p[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + p[2]
		}(), "not verified"},
		{"not a JWT", "abc.def.ghi", "not a JWS-compact JWT"},
		{"two parts", "abc.def", "not a JWS-compact JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) { f.wantInvalid(t, tc.token, tc.reason) })
	}
	f.wantOK(sign(t, jose.RS256, rsaKey2, "rsa2", c), "User:alice")
}

func TestOAuthMalformed(t *testing.T) {
	testKeys(t)
	f := newOAuthFixture(t, OAuthConfig{}, bothKeys()...)
	tok := sign(t, jose.RS256, rsaKey, "rsa1", claims())
	for _, msg := range []string{
		"",
		"\x01",
		"y,,\x01auth=Bearer " + tok + "\x01\x01",
		"p=tls,,\x01auth=Bearer " + tok + "\x01\x01",
		"n\x01auth=Bearer " + tok + "\x01\x01",
		"n,\x01auth=Bearer " + tok + "\x01\x01",
		"n,x=alice,\x01auth=Bearer " + tok + "\x01\x01",
		"n,a=,\x01auth=Bearer " + tok + "\x01\x01",
		"n,a=al=ice,\x01auth=Bearer " + tok + "\x01\x01",
		"n,,auth=Bearer " + tok + "\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01",
		"n,,\x01auth=Bearer " + tok,
		"n,,\x01\x01",
		"n,,\x01\x01\x01",
		"n,,\x01host=x\x01\x01",
		"n,,\x01auth=Basic " + tok + "\x01\x01",
		"n,,\x01auth=Bearer\x01\x01",
		"n,,\x01auth=Bearer" + tok + "\x01\x01",
		"n,,\x01auth=Bearer " + tok + "!\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01auth=Bearer " + tok + "\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01k\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01k=\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01k1=v\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01k=\x00\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01\x01" + strings.Repeat("x", maxOAuthMessage),
	} {
		s, out, done, err := f.step([]byte(msg))
		if done || out != nil {
			t.Errorf("%q: out %q, done %v", msg, out, done)
		}
		wantFailure(t, err, "malformed OAUTHBEARER client message")
		if _, _, err2 := s.Step([]byte{1}); err2 != err {
			t.Errorf("%q: 0x01 after failure: %v", msg, err2)
		}
	}
	// An authzid other than the token's user.
	_, out, _, err := f.step([]byte("n,a=bob,\x01auth=Bearer " + tok + "\x01\x01"))
	wantFailure(t, err, `authorization id "bob" differs from the token's user "alice"`)
	if out != nil {
		t.Errorf("authzid mismatch sent %q", out)
	}
}

func TestOAuthKeyRotation(t *testing.T) {
	testKeys(t)
	f := newOAuthFixture(t, OAuthConfig{}, pub(rsaKey, "k1"))
	r := f.m.(Reloader)
	tok1 := sign(t, jose.RS256, rsaKey, "k1", claims())
	tok2 := sign(t, jose.ES256, ecKey, "k2", claims("sub", "bob"))
	f.wantOK(tok1, "User:alice")

	// The file changes; Start looks again only once a second has passed.
	f.writeJWKS(pub(ecKey, "k2"))
	f.now = f.now.Add(500 * time.Millisecond)
	f.wantOK(tok1, "User:alice")
	f.now = f.now.Add(500 * time.Millisecond)
	f.wantOK(tok2, "User:bob")
	t.Run("old key", func(t *testing.T) { f.wantInvalid(t, tok1, `no key with kid "k1"`) })
	if err := r.Reload(); err != nil {
		t.Errorf("Reload of an unchanged good file: %v", err)
	}

	// A bad file keeps the keys, and Reload reports it until it is fixed.
	for _, bad := range []string{"{not json", `{"keys":[]}`, `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`} {
		f.writeRaw([]byte(bad))
		if err := r.Reload(); err == nil || !strings.Contains(err.Error(), f.path) {
			t.Errorf("Reload of %q: %v", bad, err)
		}
		f.now = f.now.Add(time.Second)
		f.wantOK(tok2, "User:bob")
		if err := r.Reload(); err == nil {
			t.Errorf("the error of %q was forgotten", bad)
		}
		// A token the kept keys refuse says why the new file is not in
		// use (the reason goes to the server's log, not the client).
		t.Run("refused while "+bad, func(t *testing.T) {
			f.wantInvalid(t, tok1, `no key with kid "k1"; the keys in use are the last good ones, because sasl: JWKS file `+f.path)
		})
	}
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil {
		t.Errorf("Reload of a missing file succeeded")
	}
	f.wantOK(tok2, "User:bob")
	t.Run("refused while missing", func(t *testing.T) {
		f.wantInvalid(t, tok1, "the keys in use are the last good ones, because sasl: JWKS file: stat "+f.path)
	})

	// Both keys; Reload takes them at once, without waiting for a second.
	f.writeJWKS(pub(rsaKey, "k1"), pub(ecKey, "k2"))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	f.wantOK(tok1, "User:alice")
	f.wantOK(tok2, "User:bob")
	t.Run("good file again", func(t *testing.T) {
		tok3 := sign(t, jose.RS256, rsaKey, "k3", claims())
		_, _, _, err := f.step(initial(tok3))
		if err == nil || strings.Contains(err.Error(), "last good") {
			t.Errorf("refusal with a good file: %v", err)
		}
	})
}

// Reload (an operator's SIGHUP) reads the file even when a replacement has
// the same size and time as the file it replaced (a key renamed, the time
// kept by the tool that copied it); the once-a-second look on its own skips
// such a file.
func TestOAuthReloadReadsSameSizeFile(t *testing.T) {
	testKeys(t)
	f := newOAuthFixture(t, OAuthConfig{}, pub(rsaKey, "ka"))
	st, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	f.writeJWKS(pub(rsaKey, "kb"))
	if err := os.Chtimes(f.path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(f.path); st2.Size() != st.Size() {
		t.Fatalf("the fixture's files differ in size: %d and %d", st.Size(), st2.Size())
	}
	tokB := sign(t, jose.RS256, rsaKey, "kb", claims())
	f.now = f.now.Add(time.Second)
	t.Run("unchanged by size and time", func(t *testing.T) { f.wantInvalid(t, tokB, `no key with kid "kb"`) })
	if err := f.m.(Reloader).Reload(); err != nil {
		t.Fatal(err)
	}
	f.wantOK(tokB, "User:alice")
}

func TestNewOAuthBearerErrors(t *testing.T) {
	testKeys(t)
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	smallJWKS, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub(small, "s")}})
	encKey := pub(rsaKey, "e")
	encKey.Use = "enc"
	encJWKS, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{encKey}})
	for name, cfg := range map[string]OAuthConfig{
		"no file":       {},
		"missing file":  {JWKSFile: filepath.Join(dir, "missing.json")},
		"not JSON":      {JWKSFile: write("bad.json", "keys")},
		"no keys":       {JWKSFile: write("empty.json", `{"keys":[]}`)},
		"symmetric key": {JWKSFile: write("oct.json", `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`)},
		"1024-bit RSA":  {JWKSFile: write("small.json", string(smallJWKS))},
		"encryption":    {JWKSFile: write("enc.json", string(encJWKS))},
		"negative skew": {JWKSFile: write("good.json", `{"keys":[`+string(must(json.Marshal(pub(ecKey, "x"))))+`]}`), ClockSkew: -time.Second},
	} {
		if _, err := NewOAuthBearer(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Unusable keys beside a good one are skipped; a private JWK counts
	// as its public key.
	mixed, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		pub(small, "s"), encKey, {Key: ecKey, KeyID: "priv"},
	}})
	f := newOAuthFixture(t, OAuthConfig{}, pub(rsaKey, "r"))
	f.writeRaw(mixed)
	if err := f.m.(Reloader).Reload(); err != nil {
		t.Fatal(err)
	}
	f.wantOK(sign(t, jose.ES256, ecKey, "priv", claims()), "User:alice")
	t.Run("skipped key", func(t *testing.T) {
		f.wantInvalid(t, sign(t, jose.RS256, small, "s", claims()), `no key with kid "s"`)
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// signRaw signs payload, a claims set written by hand (so that it can
// repeat a name), with the RSA test key.
func signRaw(t *testing.T, payload string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: rsaKey}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "rsa1"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestOAuthClaimNamesExact: a checked claim must be spelled exactly and
// appear once. Go's JSON decoding matched claim names ignoring case and kept
// the last of repeated ones, so a token for another audience passed with an
// extra "AUD", an expired one with a later "Exp", and {"sub":"alice",
// "sub":"admin"} logged in as admin.
func TestOAuthClaimNamesExact(t *testing.T) {
	testKeys(t)
	f := newOAuthFixture(t, OAuthConfig{Issuer: "https://idp", Audience: "cohort"}, bothKeys()...)
	exp, past := t0.Add(time.Hour).Unix(), t0.Add(-time.Hour).Unix()
	body := func(rest string) string {
		return fmt.Sprintf(`{"iss":"https://idp","iat":%d,%s}`, t0.Unix(), rest)
	}
	f.wantOK(signRaw(t, body(fmt.Sprintf(`"aud":"cohort","sub":"alice","exp":%d,"Custom":1,"custom":2`, exp))), "User:alice")
	for _, tc := range []struct{ name, payload, reason string }{
		{"audience in two cases", body(fmt.Sprintf(`"aud":"other","AUD":"cohort","sub":"alice","exp":%d`, exp)), `"AUD"`},
		{"issuer in two cases", fmt.Sprintf(`{"iss":"https://evil","Iss":"https://idp","aud":"cohort","sub":"alice","exp":%d}`, exp), `"Iss"`},
		{"expiry in two cases", body(fmt.Sprintf(`"aud":"cohort","sub":"alice","exp":%d,"Exp":%d`, past, exp)), `"Exp"`},
		{"expiry only in upper case", body(fmt.Sprintf(`"aud":"cohort","sub":"alice","EXP":%d`, exp)), `"EXP"`},
		{"subject twice", body(fmt.Sprintf(`"aud":"cohort","sub":"alice","sub":"admin","exp":%d`, exp)), `"sub" appears twice`},
		{"audience twice", body(fmt.Sprintf(`"aud":"other","aud":"cohort","sub":"alice","exp":%d`, exp)), `"aud" appears twice`},
	} {
		t.Run(tc.name, func(t *testing.T) { f.wantInvalid(t, signRaw(t, tc.payload), tc.reason) })
	}
}

// TestOAuthClockOffIsMeasured: a token refused for its times says how far
// its claim is from the node's clock and the skew allowed, so that the
// operator can tell a client (or token issuer) whose clock is hours off from
// a token that merely expired: "issued in the future (iat)" alone did not.
func TestOAuthClockOffIsMeasured(t *testing.T) {
	testKeys(t)
	f := newOAuthFixture(t, OAuthConfig{}, bothKeys()...)
	good := func(extra ...any) string { return sign(t, jose.RS256, rsaKey, "rsa1", claims(extra...)) }
	for _, tc := range []struct{ name, token, reason string }{
		{"iat", good("iat", t0.Add(2*time.Hour).Unix(), "exp", t0.Add(3*time.Hour).Unix()),
			"issued in the future (iat 2023-11-15T00:13:20Z, 2h0m0s after the node's clock; 30s of clock skew allowed)"},
		{"nbf", good("nbf", t0.Add(90*time.Minute).Unix()),
			"not valid yet (nbf 2023-11-14T23:43:20Z, 1h30m0s after the node's clock; 30s of clock skew allowed)"},
		{"exp", good("exp", t0.Add(-5*time.Hour).Unix()),
			"expired (exp 2023-11-14T17:13:20Z, 5h0m0s before the node's clock; 30s of clock skew allowed)"},
	} {
		t.Run(tc.name, func(t *testing.T) { f.wantInvalid(t, tc.token, tc.reason) })
	}
}

// TestOAuthLongKidCut: a token's kid is the client's choice, quoted in the
// failure reason the server logs before the token is verified; a long one
// (a token may be 64 KiB) is cut to its start and length (LogText), so that a client
// with no credential cannot make each logged failure tens of KiB.
func TestOAuthLongKidCut(t *testing.T) {
	testKeys(t)
	f := newOAuthFixture(t, OAuthConfig{}, bothKeys()...)
	long := strings.Repeat("k", 40000)
	for _, tc := range []struct{ name, token, reason string }{
		{"unknown kid", sign(t, jose.RS256, rsaKey, long, claims()), `no key with kid "` + strings.Repeat("k", 256)},
		{"unknown kid, bad signature", handmade(map[string]any{"alg": "RS256", "kid": long}, claims(), func(string) []byte { return make([]byte, 256) }), "no key with kid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := f.step(initial(tc.token))
			if err == nil {
				t.Fatal("a token of an unknown kid verified")
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("reason %q does not contain %q", err.Error()[:min(len(err.Error()), 300)], tc.reason)
			}
			if len(err.Error()) > 1024 {
				t.Errorf("a %d-byte failure reason: the kid is not cut", len(err.Error()))
			}
			if !strings.Contains(err.Error(), "40000 bytes") {
				t.Errorf("the reason does not give the kid's length: %.400s", err.Error())
			}
		})
	}
}

// TestLogTextCutsAtCharacter: a cut string stays valid UTF-8 and a short one
// is left whole.
func TestLogTextCutsAtCharacter(t *testing.T) {
	if got := LogText("short"); got != "short" {
		t.Errorf("LogText(short) = %q", got)
	}
	long := strings.Repeat("é", MaxLogText) // 2 bytes each: the cut falls inside one
	got := LogText("x" + long)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, fmt.Sprintf("…(%d bytes)", 1+len(long))) || len(got) > MaxLogText+20 {
		t.Errorf("LogText of a long string = %q", got)
	}
}

package server

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/sasl"
)

// memCreds is a fixed credential store for the SASL fuzz target.
type memCreds map[string]sasl.Credential

func (m memCreds) Lookup(user, mech string) (sasl.Credential, bool) {
	c, ok := m[user+"/"+mech]
	return c, ok
}

// fuzzNow is when the OAUTHBEARER tokens of the SASL fuzz targets are
// checked, and where the fuzz servers' session clocks start.
var fuzzNow = time.Unix(1_700_000_000, 0)

// saslFuzzSetup is what every connection of a SASL fuzz target shares,
// made once per fuzzing process rather than once per input: the SCRAM
// credential (thousands of PBKDF2 rounds), the OAUTHBEARER key and its
// JWKS file. None of it keeps state between exchanges.
type saslFuzzSetup struct {
	mechs  map[string]sasl.Mechanism
	signer jose.Signer
}

// newSASLFuzzSetup makes the mechanisms of the SASL fuzz servers:
// SCRAM-SHA-256 and PLAIN over one user, and OAUTHBEARER trusting
// oauthFuzzKey (issuer "https://idp", audience "cohort", checked at
// fuzzNow).
func newSASLFuzzSetup(tb testing.TB) *saslFuzzSetup {
	cred, err := sasl.NewCredential(sasl.ScramSHA256, "pw", sasl.MinIterations)
	if err != nil {
		tb.Fatal(err)
	}
	creds := memCreds{"u/" + sasl.ScramSHA256: cred}
	scram, err := sasl.NewSCRAM(sasl.ScramSHA256, creds)
	if err != nil {
		tb.Fatal(err)
	}
	key := oauthFuzzKey(tb)
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &key.PublicKey, KeyID: "fuzz", Use: "sig", Algorithm: string(jose.ES256)}}})
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks, 0o600); err != nil {
		tb.Fatal(err)
	}
	oauth, err := sasl.NewOAuthBearer(sasl.OAuthConfig{JWKSFile: path, Issuer: "https://idp", Audience: "cohort",
		Now: func() time.Time { return fuzzNow }})
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "fuzz"))
	if err != nil {
		tb.Fatal(err)
	}
	return &saslFuzzSetup{signer: signer, mechs: map[string]sasl.Mechanism{
		sasl.ScramSHA256: scram, sasl.Plain: sasl.NewPlain(creds), sasl.OAuthBearer: oauth}}
}

// oauthFuzzKey is the P-256 key that signs the fuzz targets' tokens. Its
// scalar is fixed, not drawn at random, so that the tokens written into
// seeds and into a saved corpus verify in every later run.
func oauthFuzzKey(tb testing.TB) *ecdsa.PrivateKey {
	d := sha256.Sum256([]byte("cohort OAUTHBEARER fuzz key"))
	key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// sign returns the JWS-compact token of payload (any bytes: the claims
// are not looked at).
func (fx *saslFuzzSetup) sign(tb testing.TB, payload []byte) string {
	obj, err := fx.signer.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// oauthClaims are claims that verify at fuzzNow, with exp d after it.
func oauthClaims(d time.Duration) []byte {
	return fmt.Appendf(nil, `{"iss":"https://idp","aud":"cohort","sub":"alice","exp":%d,"iat":%d}`,
		fuzzNow.Add(d).Unix(), fuzzNow.Unix())
}

// saslFuzzServer is a server whose one listener is SASL_PLAINTEXT with
// fx's mechanisms, sessions of an hour (so that re-authentications are
// reachable), and an allow-all authorizer. Its session clock starts at
// fuzzNow and moves 250ms at each reading, so that a token's exp can pass
// and re-authentications a second apart happen within one input.
func saslFuzzServer(t testing.TB, fx *saslFuzzSetup) *Server {
	srv := fuzzServer(t)
	var ticks atomic.Int64
	sec := &Security{Mechanisms: fx.mechs,
		FailedAuthDelay: time.Microsecond, AuthTimeout: time.Second, Authorizer: allowAll{},
		SessionLifetime: time.Hour, // sessions that expire: re-authentications are reachable
		Now:             func() time.Time { return fuzzNow.Add(time.Duration(ticks.Add(1)) * 250 * time.Millisecond) }}
	srv.cfg.Security = sec
	srv.sec = newSecurityRuntime(sec)
	srv.authz = sec.Authorizer
	srv.lcfg = []Listener{{Name: ProtocolSASLPlaintext, Protocol: ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
	return srv
}

// saslFrames builds the request frames of the SASL seeds.
type saslFrames struct{ f *kmsg.RequestFormatter }

func newSASLFrames() saslFrames {
	return saslFrames{kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))}
}

func (s saslFrames) frame(r kmsg.Request) []byte { return s.f.AppendRequest(nil, r, 1) }

func (s saslFrames) hs(v int16, mech string) []byte {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = v, mech
	return s.frame(r)
}

func (s saslFrames) auth(v int16, tok string) []byte {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = v, []byte(tok)
	return s.frame(r)
}

// raw is a token of the exchange after a v0 handshake: a size and bytes.
func raw(tok string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...)
}

// saslSeeds are request streams that reach each state of the SASL
// exchange: handshakes v0 and v1, then SaslAuthenticate frames and raw
// tokens with SCRAM, PLAIN and OAUTHBEARER messages, and
// re-authentications.
func saslSeeds(fx *saslFuzzSetup, tb testing.TB) [][]byte {
	s := newSASLFrames()
	hs, frame := s.hs, s.frame
	auth := func(tok string) []byte { return s.auth(2, tok) }
	tok := fx.sign(tb, oauthClaims(time.Hour))
	bearer := "n,,\x01auth=Bearer " + tok + "\x01\x01"
	short := "n,,\x01auth=Bearer " + fx.sign(tb, oauthClaims(2*time.Second)) + "\x01\x01"
	return [][]byte{
		bytes.Join([][]byte{hs(1, sasl.ScramSHA256), auth("n,,n=u,r=abcdef"), auth("c=biws,r=abcdefXYZ,p=AAAA")}, nil),
		bytes.Join([][]byte{hs(1, sasl.Plain), auth("\x00u\x00pw"), frame(kmsg.NewPtrListGroupsRequest())}, nil),
		bytes.Join([][]byte{hs(0, sasl.Plain), raw("\x00u\x00pw"), frame(kmsg.NewPtrListGroupsRequest())}, nil),
		bytes.Join([][]byte{hs(0, sasl.ScramSHA256), raw("n,,n=u,r=x"), raw("c=biws,r=x,p=")}, nil),
		bytes.Join([][]byte{frame(kmsg.NewPtrApiVersionsRequest()), hs(1, sasl.OAuthBearer)}, nil),
		bytes.Join([][]byte{hs(1, sasl.ScramSHA256), hs(1, sasl.ScramSHA256)}, nil),
		// Re-authentications: with the same mechanism, then another.
		bytes.Join([][]byte{hs(1, sasl.Plain), auth("\x00u\x00pw"), hs(1, sasl.Plain), auth("\x00u\x00pw"), frame(kmsg.NewPtrListGroupsRequest())}, nil),
		bytes.Join([][]byte{hs(1, sasl.Plain), auth("\x00u\x00pw"), hs(1, sasl.ScramSHA256), auth("n,,n=u,r=abcdef")}, nil),
		auth("n,,n=u,r=abc"),
		// OAUTHBEARER: a token that verifies, then requests and a
		// re-authentication; one over raw tokens; a token that expires
		// two seconds in; a bad token and its "\x01" reply; a GS2 header
		// that is not "n,,".
		bytes.Join([][]byte{hs(1, sasl.OAuthBearer), auth(bearer), frame(kmsg.NewPtrListGroupsRequest()), hs(1, sasl.OAuthBearer), auth(bearer)}, nil),
		bytes.Join([][]byte{hs(0, sasl.OAuthBearer), raw(bearer), frame(kmsg.NewPtrListGroupsRequest())}, nil),
		bytes.Join([][]byte{hs(1, sasl.OAuthBearer), auth(short), frame(kmsg.NewPtrListGroupsRequest()), frame(kmsg.NewPtrListGroupsRequest()),
			frame(kmsg.NewPtrListGroupsRequest()), frame(kmsg.NewPtrListGroupsRequest()), hs(1, sasl.OAuthBearer), auth(short)}, nil),
		bytes.Join([][]byte{hs(1, sasl.OAuthBearer), auth("n,,\x01auth=Bearer a.b.c\x01\x01"), auth("\x01")}, nil),
		bytes.Join([][]byte{hs(1, sasl.OAuthBearer), auth("y,a=alice,\x01auth=Bearer " + tok + "\x01\x01")}, nil),
	}
}

// FuzzSASLConnStream feeds arbitrary bytes to a connection of a SASL
// listener (real SCRAM-SHA-256, PLAIN and OAUTHBEARER mechanisms): it must
// end (answer or close) without a panic and without hanging, whatever
// state the bytes drive the exchange into.
func FuzzSASLConnStream(f *testing.F) {
	fx := newSASLFuzzSetup(f)
	for _, s := range saslSeeds(fx, f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		streamConn(saslFuzzServer(t, fx), stream)
	})
}

// tokenPlaceholder, in FuzzSASLOAuthConn's client message, stands for the
// token signed over the fuzzed claims.
const tokenPlaceholder = "$T"

// FuzzSASLOAuthConn runs an OAUTHBEARER exchange over a connection of a
// SASL listener, with a fuzzed client message in which tokenPlaceholder is
// replaced by a token correctly signed over fuzzed claims (padded with
// whitespace to a size chosen by size, up to about a MiB), so that GS2
// headers, extensions and claims are all reached with a signature that
// verifies. mode picks the framing: SaslAuthenticate v0, v1 or v2 after a
// v1 handshake, or a raw token after a v0 one; mode&4 re-authenticates
// with the same message; tail is sent after the exchange.
//
// The server must never panic or hang, and it must decide as the
// mechanism alone does: the exchange succeeds exactly when the mechanism
// accepts the message and the message is within the token limit, and a
// failed exchange closes the connection (after a SASL_AUTHENTICATION_FAILED
// answer, or with none on raw tokens or an oversized frame).
func FuzzSASLOAuthConn(f *testing.F) {
	fx := newSASLFuzzSetup(f)
	ok := oauthClaims(time.Hour)
	for _, s := range []struct {
		mode   uint8
		msg    string
		claims []byte
		size   uint8
		tail   []byte
	}{
		{2, "n,,\x01auth=Bearer $T\x01\x01", ok, 0, nil},
		{1, "n,a=alice,\x01auth=Bearer $T\x01\x01", ok, 0, newSASLFrames().frame(kmsg.NewPtrListGroupsRequest())},
		{6, "n,,\x01auth=Bearer $T\x01scope=a b\x01ext=\x01\x01", ok, 0, nil},
		{3, "n,,\x01auth=Bearer $T\x01\x01", ok, 0, raw("\x01")},
		{0, "n,a=bob,\x01auth=Bearer $T\x01\x01", ok, 0, newSASLFrames().auth(0, "\x01")},
		{2, "y,,\x01auth=Bearer $T\x01\x01", ok, 0, nil},
		{2, "p=tls-unique,,\x01auth=Bearer $T\x01\x01", ok, 0, nil},
		{2, "n,a=,\x01auth=Bearer $T\x01\x01", ok, 0, nil},
		{2, "n,,\x01auth=Bearer $T\x01", ok, 0, nil},
		{2, "n,,\x01auth=bearer $T\x01\x01", ok, 0, nil},
		{2, "n,,\x01auth=Bearer  $T\x01\x01", ok, 0, nil},
		{2, "n,,\x01auth=Bearer $T.$T\x01\x01", ok, 0, nil},
		{2, "n,,\x01auth=Bearer a.b.c\x01\x01", ok, 0, nil},
		{2, "n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.e30.\x01\x01", ok, 0, nil},
		{2, "$T", ok, 0, nil},
		{2, "", nil, 0, nil},
		{3, "\x00\xff\x01=", nil, 0, nil},
		// Claims that do not hold: expired, no exp, another issuer, an
		// empty or non-string sub, a name twice, not JSON.
		{2, "n,,\x01auth=Bearer $T\x01\x01", oauthClaims(-time.Hour), 0, nil},
		{2, "n,,\x01auth=Bearer $T\x01\x01", []byte(`{"iss":"https://idp","aud":"cohort","sub":"alice"}`), 0, nil},
		{2, "n,,\x01auth=Bearer $T\x01\x01", bytes.Replace(ok, []byte("https://idp"), []byte("https://other"), 1), 0, nil},
		{2, "n,,\x01auth=Bearer $T\x01\x01", bytes.Replace(ok, []byte(`"alice"`), []byte(`" "`), 1), 0, nil},
		{2, "n,,\x01auth=Bearer $T\x01\x01", bytes.Replace(ok, []byte(`"alice"`), []byte(`{"a":1}`), 1), 0, nil},
		{2, "n,,\x01auth=Bearer $T\x01\x01", bytes.Replace(ok, []byte(`{`), []byte(`{"sub":"root",`), 1), 0, nil},
		{2, "n,,\x01auth=Bearer $T\x01\x01", []byte(`{"a":`), 0, nil},
		// Huge tokens: of some KiB, just over the token limit within the
		// frame limit, over the frame limit, over the raw token limit.
		{2, "n,,\x01auth=Bearer $T\x01\x01", ok, 0x3d, nil},
		{2, "n,,\x01auth=Bearer $T\x01\x01", ok, 0x7c, nil},
		{2, "n,,\x01auth=Bearer $T\x01\x01", ok, 0x80, nil},
		{3, "n,,\x01auth=Bearer $T\x01\x01", ok, 0x7c, nil},
	} {
		f.Add(s.mode, []byte(s.msg), s.claims, s.size, s.tail)
	}
	oauth := fx.mechs[sasl.OAuthBearer]
	f.Fuzz(func(t *testing.T, mode uint8, msg, claims []byte, size uint8, tail []byte) {
		tok := fx.sign(t, padClaims(claims, size))
		m := bytes.ReplaceAll(msg, []byte(tokenPlaceholder), []byte(tok))
		_, done, _ := oauth.Start().Step(m)
		want := done && len(m) <= maxSaslTokenBytes
		srv := saslFuzzServer(t, fx)
		srv.cfg.MaxFrameBytes = 1 << 20 // above the unauthenticated limit: that limit is the one reached
		c := &pipeClient{t: t, nc: pipeConn(srv), s: newSASLFrames()}
		defer srv.Close()
		defer c.nc.Close()
		rounds := 1
		if mode&4 != 0 {
			rounds = 2
		}
		for range rounds {
			if !c.oauthExchange(mode%4, m, want) {
				return // failed as it had to, and closed
			}
		}
		go func() {
			c.nc.Write(tail)
			c.nc.Close()
		}()
		io.Copy(io.Discard, c.nc)
	})
}

// padClaims appends whitespace to claims, which JSON ignores: none for
// size 0, else (8 + size&7) << ((size>>3) % 17) bytes, 9 bytes to nearly
// a MiB, so that tokens of every order of size are tried.
func padClaims(claims []byte, size uint8) []byte {
	if size == 0 {
		return claims
	}
	n := (8 + int(size&7)) << ((size >> 3) % 17)
	return append(bytes.Clone(claims), bytes.Repeat([]byte(" "), n)...)
}

// pipeClient is the client end of a fuzzed connection, which reads each
// answer before it sends on, so that what the server answered is known.
type pipeClient struct {
	t  *testing.T
	nc net.Conn
	s  saslFrames
}

// answerWait bounds the wait for an answer: longer means the server hangs.
const answerWait = 10 * time.Second

// read returns the next size-prefixed frame from the server, or nil when
// the server closed the connection.
func (c *pipeClient) read() []byte {
	c.nc.SetReadDeadline(time.Now().Add(answerWait))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		c.checkClosed(err)
		return nil
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, b); err != nil {
		c.t.Fatalf("a frame cut short: %v", err)
	}
	return b
}

// checkClosed fails the input unless err says that the server closed the
// connection (rather than that it stopped answering).
func (c *pipeClient) checkClosed(err error) {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		c.t.Fatalf("no answer and no close: %v", err)
	}
}

// send writes b; the server may have closed the connection without
// reading it all (an oversized frame), which read then tells.
func (c *pipeClient) send(b []byte) {
	c.nc.SetWriteDeadline(time.Now().Add(answerWait))
	if _, err := c.nc.Write(b); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		c.t.Fatalf("write: %v", err)
	}
}

// oauthExchange runs one OAUTHBEARER exchange with message m, in the
// framing mode picks (see FuzzSASLOAuthConn), and checks that the server
// accepted it exactly when want. It returns whether it was accepted.
func (c *pipeClient) oauthExchange(mode uint8, m []byte, want bool) bool {
	t := c.t
	hsVersion := int16(1)
	if mode == 3 {
		hsVersion = 0
	}
	c.send(c.s.hs(hsVersion, sasl.OAuthBearer))
	hs := c.read()
	if hs == nil {
		// A re-authentication the server does not take (a v0
		// exchange gave no session to renew) may close here.
		return false
	}
	hr := kmsg.NewPtrSASLHandshakeResponse()
	hr.Version = hsVersion
	if err := hr.ReadFrom(hs[4:]); err != nil {
		t.Fatalf("handshake answer: %v", err)
	}
	if hr.ErrorCode != 0 {
		return false
	}
	if mode == 3 {
		c.send(raw(string(m)))
		out := c.read()
		if (out != nil) != want {
			t.Fatalf("raw OAUTHBEARER token: answered %v, the mechanism accepts it: %v", out != nil, want)
		}
		if len(out) != 0 {
			t.Fatalf("raw OAUTHBEARER success with a %d-byte server token", len(out))
		}
		return want
	}
	c.send(c.s.auth(int16(mode), string(m)))
	b := c.read()
	if b == nil {
		if want {
			t.Fatal("an accepted OAUTHBEARER message got no answer")
		}
		return false
	}
	r := kmsg.NewPtrSASLAuthenticateResponse()
	r.Version = int16(mode)
	body := b[4:]
	if r.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("SaslAuthenticate answer header: % x", b)
		}
		body = body[1:]
	}
	if err := r.ReadFrom(body); err != nil {
		t.Fatalf("SaslAuthenticate answer: %v", err)
	}
	if got := r.ErrorCode == 0; got != want {
		t.Fatalf("SaslAuthenticate error %d, the mechanism accepts the message: %v", r.ErrorCode, want)
	}
	if !want {
		if r.ErrorCode != errSaslAuthenticationFailed || r.ErrorMessage == nil || *r.ErrorMessage == "" {
			t.Fatalf("failed SaslAuthenticate answer: error %d, message %v", r.ErrorCode, r.ErrorMessage)
		}
		if rest := c.read(); rest != nil {
			t.Fatalf("the connection stayed open after a failed authentication: %d more bytes", len(rest))
		}
	}
	return want
}

// TestSASLOAuthFuzzAccepts checks the fuzz set-up itself: a token it signs
// authenticates in every framing, re-authenticates, and one of another
// audience fails and closes; without that, FuzzSASLOAuthConn would only
// ever reach failures.
func TestSASLOAuthFuzzAccepts(t *testing.T) {
	fx := newSASLFuzzSetup(t)
	good := []byte("n,a=alice,\x01auth=Bearer " + fx.sign(t, oauthClaims(time.Hour)) + "\x01\x01")
	bad := []byte("n,,\x01auth=Bearer " + fx.sign(t, bytes.Replace(oauthClaims(time.Hour), []byte(`"cohort"`), []byte(`"other"`), 1)) + "\x01\x01")
	for mode := range uint8(4) {
		for _, tc := range []struct {
			msg    []byte
			want   bool
			rounds int
		}{{good, true, 2}, {bad, false, 1}} {
			srv := saslFuzzServer(t, fx)
			c := &pipeClient{t: t, nc: pipeConn(srv), s: newSASLFrames()}
			for round := range tc.rounds {
				if got := c.oauthExchange(mode, tc.msg, tc.want); got != tc.want && (round == 0 || mode == 1 || mode == 2) {
					t.Errorf("mode %d, round %d: accepted %v, want %v", mode, round, got, tc.want)
				}
			}
			c.nc.Close()
			srv.Close()
		}
	}
}

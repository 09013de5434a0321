package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/sasl"
)

// testMech is a two-step SASL mechanism for the connection's state
// machine: the client sends "user:password", the server answers
// "challenge", the client sends "ok", the server answers "welcome".
type testMech struct {
	mu     sync.Mutex
	users  map[string]string
	expiry time.Time
}

func (m *testMech) Name() string { return "TEST" }
func (m *testMech) Start() sasl.Session {
	return &testSession{m: m}
}

func (m *testMech) setUser(u, p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p == "" {
		delete(m.users, u)
	} else {
		m.users[u] = p
	}
}

type testSession struct {
	m    *testMech
	step int
	user string
}

func (s *testSession) Step(in []byte) ([]byte, bool, error) {
	s.step++
	switch s.step {
	case 1:
		u, p, _ := strings.Cut(string(in), ":")
		s.m.mu.Lock()
		want, ok := s.m.users[u]
		s.m.mu.Unlock()
		if !ok || want != p {
			return nil, false, fmt.Errorf("%w: bad password for %s", sasl.ErrAuthFailed, u)
		}
		s.user = u
		return []byte("challenge"), false, nil
	case 2:
		if string(in) != "ok" {
			return nil, false, fmt.Errorf("%w: bad second message", sasl.ErrAuthFailed)
		}
		return []byte("welcome"), true, nil
	}
	return nil, false, fmt.Errorf("%w: too many steps", sasl.ErrAuthFailed)
}
func (s *testSession) Principal() string { return "User:" + s.user }
func (s *testSession) Expiry() time.Time { return s.m.expiry }

// allowAll is an authorizer that allows everything.
type allowAll struct{}

func (allowAll) Authorize(string, string, acl.Operation, acl.ResourceType, string) bool { return true }
func (allowAll) AuthorizedOperations(string, string, acl.ResourceType, string) int32    { return 0 }

type authFixture struct {
	ts   *testServer
	mech *testMech
	now  atomic.Int64 // unix nanos of the fake clock
	reg  *prometheus.Registry
}

func startAuthServer(t *testing.T, protocol string, tlsCfg *tls.Config, edit func(*Security), opts ...serverOpt) *authFixture {
	t.Helper()
	f := &authFixture{mech: &testMech{users: map[string]string{"alice": "secret", "bob": "hunter2"}},
		reg: prometheus.NewRegistry()}
	f.now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	sec := &Security{
		Mechanisms:      map[string]sasl.Mechanism{"TEST": f.mech},
		FailedAuthDelay: time.Millisecond,
		AuthTimeout:     30 * time.Second, // ends a hang; a loaded CI machine must not hit it (the timeout tests set their own)
		Authorizer:      allowAll{},
		Now:             func() time.Time { return time.Unix(0, f.now.Load()) },
	}
	if edit != nil {
		edit(sec)
	}
	f.ts = startServer(t, append([]serverOpt{func(c *Config) {
		c.Listen = ""
		c.Listeners = []Listener{{Protocol: protocol, Addr: "127.0.0.1:0", TLS: tlsCfg}}
		c.Security = sec
		c.Registerer = f.reg
	}}, opts...)...)
	return f
}

// lastPrincipal is the principal of the last request the coordinator saw.
func (f *authFixture) lastPrincipal() string {
	calls := f.ts.groups.snapshot()
	if len(calls) == 0 {
		return ""
	}
	return calls[len(calls)-1].client.Principal
}

func (f *authFixture) advance(d time.Duration) { f.now.Add(int64(d)) }

// noReauthCount is cohort_server_authentications_without_reauthentication_total
// for mech over every listener.
func (f *authFixture) noReauthCount(mech string) float64 {
	var n float64
	for _, lm := range f.ts.srv.metrics.listeners {
		for _, mm := range lm.mechs {
			if mm.name == mech && mm.noReauth != nil {
				n += testutil.ToFloat64(mm.noReauth)
			}
		}
	}
	return n
}

func (f *authFixture) authCount(mech, result string) float64 {
	var n float64
	for l := range f.ts.srv.metrics.listeners {
		n += testutil.ToFloat64(f.ts.srv.metrics.auth.WithLabelValues(l, mech, result))
	}
	return n
}

func handshake(t *testing.T, c *rawConn, v int16, mech string) *kmsg.SASLHandshakeResponse {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(v)
	req.Mechanism = mech
	return c.roundTrip(req).(*kmsg.SASLHandshakeResponse)
}

func authenticate(t *testing.T, c *rawConn, v int16, token string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(v)
	req.SASLAuthBytes = []byte(token)
	return c.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
}

// login runs the whole v1 exchange as user.
func login(t *testing.T, c *rawConn, user, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	if h := handshake(t, c, 1, "TEST"); h.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", h.ErrorCode)
	}
	if r := authenticate(t, c, 2, user+":"+pass); r.ErrorCode != 0 || string(r.SASLAuthBytes) != "challenge" {
		t.Fatalf("first step: error %d, bytes %q", r.ErrorCode, r.SASLAuthBytes)
	}
	r := authenticate(t, c, 2, "ok")
	if r.ErrorCode != 0 || string(r.SASLAuthBytes) != "welcome" {
		t.Fatalf("second step: error %d, bytes %q", r.ErrorCode, r.SASLAuthBytes)
	}
	return r
}

// heartbeat sends a Heartbeat (a request the authorizer sees) and returns
// its error code.
func heartbeat(t *testing.T, c *rawConn) int16 {
	t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID = "g", "m"
	return c.roundTrip(req).(*kmsg.HeartbeatResponse).ErrorCode
}

func TestSASLHandshakeAndAuthenticate(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	c := f.ts.dial(t)
	// ApiVersions is allowed before authentication.
	if av := c.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); av.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: %d", av.ErrorCode)
	}
	h := handshake(t, c, 1, "TEST")
	if h.ErrorCode != 0 || len(h.SupportedMechanisms) != 1 || h.SupportedMechanisms[0] != "TEST" {
		t.Fatalf("handshake: %+v", h)
	}
	login2 := func() {
		if r := authenticate(t, c, 2, "alice:secret"); r.ErrorCode != 0 || string(r.SASLAuthBytes) != "challenge" {
			t.Fatalf("first step: %+v", r)
		}
		r := authenticate(t, c, 2, "ok")
		if r.ErrorCode != 0 || string(r.SASLAuthBytes) != "welcome" || r.SessionLifetimeMillis != 0 {
			t.Fatalf("second step: %+v", r)
		}
	}
	login2()
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat after authentication: %d", code)
	}
	if got := f.lastPrincipal(); got != "User:alice" {
		t.Fatalf("principal %q, want User:alice", got)
	}
	if n := f.authCount("TEST", "success"); n != 1 {
		t.Fatalf("success count %v", n)
	}
}

func TestSASLv0RawTokens(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	c := f.ts.dial(t)
	if h := handshake(t, c, 0, "TEST"); h.ErrorCode != 0 {
		t.Fatalf("handshake v0: %d", h.ErrorCode)
	}
	raw := func(tok string) string {
		var b bytes.Buffer
		b.Write([]byte{0, 0, 0, byte(len(tok))})
		b.WriteString(tok)
		c.writeRaw(b.Bytes())
		var size [4]byte
		if _, err := c.nc.Read(size[:]); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, size[3])
		if _, err := c.nc.Read(buf); err != nil && len(buf) > 0 {
			t.Fatal(err)
		}
		return string(buf)
	}
	if got := raw("alice:secret"); got != "challenge" {
		t.Fatalf("raw step 1: %q", got)
	}
	if got := raw("ok"); got != "welcome" {
		t.Fatalf("raw step 2: %q", got)
	}
	if code := heartbeat(t, c); code != 0 || f.lastPrincipal() != "User:alice" {
		t.Fatalf("after raw authentication: code %d principal %q", code, f.lastPrincipal())
	}
	// Raw tokens carry no session lifetime: a client that cannot
	// re-authenticate, counted as Kafka's successful-authentication-no-reauth.
	if n := f.noReauthCount("TEST"); n != 1 {
		t.Fatalf("authentications without re-authentication: %v, want 1", n)
	}
}

// Successful authentications by clients that cannot re-authenticate are
// counted: SaslAuthenticate v0 (no session lifetime in its answer), not v1+
// and not a failure.
func TestSASLAuthenticationsWithoutReauthCounted(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	login(t, f.ts.dial(t), "alice", "secret") // v2
	if n := f.noReauthCount("TEST"); n != 0 {
		t.Fatalf("after a v2 login: %v, want 0", n)
	}
	c := f.ts.dial(t)
	handshake(t, c, 1, "TEST")
	authenticate(t, c, 0, "alice:secret")
	if r := authenticate(t, c, 0, "ok"); r.ErrorCode != 0 {
		t.Fatalf("v0 login: error %d", r.ErrorCode)
	}
	bad := f.ts.dial(t)
	handshake(t, bad, 1, "TEST")
	authenticate(t, bad, 0, "alice:wrong")
	if n, ok := f.noReauthCount("TEST"), f.authCount("TEST", "success"); n != 1 || ok != 2 {
		t.Fatalf("after a v0 login and a failed one: %v without re-authentication (want 1), %v successes (want 2)", n, ok)
	}
}

func TestSASLv0RawFailureCloses(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	c := f.ts.dial(t)
	handshake(t, c, 0, "TEST")
	tok := "alice:wrong"
	c.writeRaw(append([]byte{0, 0, 0, byte(len(tok))}, tok...))
	c.expectClosed()
	if n := f.authCount("TEST", "failure"); n != 1 {
		t.Fatalf("failure count %v", n)
	}
}

func TestSASLWrongPasswordAnswersThenCloses(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.FailedAuthDelay = 150 * time.Millisecond })
	c := f.ts.dial(t)
	handshake(t, c, 1, "TEST")
	start := time.Now()
	r := authenticate(t, c, 2, "alice:wrong")
	if r.ErrorCode != errSaslAuthenticationFailed {
		t.Fatalf("error %d, want SASL_AUTHENTICATION_FAILED", r.ErrorCode)
	}
	if time.Since(start) < 150*time.Millisecond {
		t.Fatalf("answered after %v, before the failed-auth delay", time.Since(start))
	}
	if r.ErrorMessage == nil || strings.Contains(*r.ErrorMessage, "wrong") || strings.Contains(*r.ErrorMessage, "alice") {
		t.Fatalf("error message %v must be Kafka's fixed text, naming no user or secret", r.ErrorMessage)
	}
	c.expectClosed()
}

func TestSASLUnsupportedMechanism(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	c := f.ts.dial(t)
	h := handshake(t, c, 1, "GSSAPI")
	if h.ErrorCode != errUnsupportedSaslMechanism || len(h.SupportedMechanisms) != 1 {
		t.Fatalf("handshake: %+v", h)
	}
	c.expectClosed()
}

// TestSASLRequestBeforeAuthenticationCloses: a request other than the SASL
// ones before authentication completes closes the connection. Before the
// SaslHandshake it is closed without an answer; in the middle of a
// SaslAuthenticate exchange (a first one, or a re-authentication) it is
// answered ILLEGAL_SASL_STATE first, as Kafka answers it, where the response
// has a place for that error.
func TestSASLRequestBeforeAuthenticationCloses(t *testing.T) {
	hb := func() kmsg.Request {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group = "g"
		return req
	}
	apiVersions := func() kmsg.Request {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
		return req
	}
	commit := func() kmsg.Request {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		req.Group = "g"
		tp := kmsg.NewOffsetCommitRequestTopic()
		tp.Topic = "t"
		tp.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 3}}
		req.Topics = append(req.Topics, tp)
		return req
	}
	metadata := func() kmsg.Request { return kmsg.NewPtrMetadataRequest() }
	afterHandshake := func(t *testing.T, _ *authFixture, c *rawConn) { handshake(t, c, 1, "TEST") }
	midExchange := func(t *testing.T, _ *authFixture, c *rawConn) {
		handshake(t, c, 1, "TEST")
		authenticate(t, c, 2, "alice:secret")
	}
	reauth := func(t *testing.T, f *authFixture, c *rawConn) {
		login(t, c, "alice", "secret")
		f.advance(2 * time.Second)
		handshake(t, c, 1, "TEST")
	}
	for _, tc := range []struct {
		name     string
		prep     func(*testing.T, *authFixture, *rawConn)
		req      func() kmsg.Request
		answered bool // with ILLEGAL_SASL_STATE, then closed
	}{
		{"before handshake", func(*testing.T, *authFixture, *rawConn) {}, hb, false},
		{"after handshake", afterHandshake, hb, true},
		{"mid exchange", midExchange, hb, true},
		{"mid exchange/ApiVersions", midExchange, apiVersions, true},
		{"mid exchange/OffsetCommit", midExchange, commit, true},
		{"mid exchange/Metadata (no top-level error)", midExchange, metadata, false},
		{"re-authenticating", reauth, hb, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.SessionLifetime = time.Minute })
			c := f.ts.dial(t)
			tc.prep(t, f, c)
			before := len(f.ts.groups.snapshot())
			req := tc.req()
			if tc.answered {
				var code int16
				switch resp := c.roundTrip(req).(type) {
				case *kmsg.HeartbeatResponse:
					code = resp.ErrorCode
				case *kmsg.ApiVersionsResponse:
					code = resp.ErrorCode
				case *kmsg.OffsetCommitResponse:
					if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 3 {
						t.Fatalf("OffsetCommit answer %+v does not list the request's partition", resp.Topics)
					}
					code = resp.Topics[0].Partitions[0].ErrorCode
				}
				if code != errIllegalSaslState {
					t.Fatalf("%s answered error %d, want ILLEGAL_SASL_STATE", kmsg.NameForKey(req.Key()), code)
				}
			} else {
				c.send(req, 1)
			}
			c.expectClosed()
			if len(f.ts.groups.snapshot()) != before {
				t.Fatal("an unauthenticated request reached the coordinator")
			}
		})
	}
}

func TestSASLAuthenticateWithoutHandshake(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	c := f.ts.dial(t)
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = []byte("alice:secret")
	c.send(req, 1)
	c.expectClosed()
}

func TestSASLHandshakeOnPlaintextListener(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	h := handshake(t, c, 1, "PLAIN")
	if h.ErrorCode != errIllegalSaslState {
		t.Fatalf("SaslHandshake on PLAINTEXT: error %d, want ILLEGAL_SASL_STATE", h.ErrorCode)
	}
	// The connection stays usable, as nothing about it changed.
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
}

func TestSASLSessionLifetimeAndReauthentication(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.SessionLifetime = time.Minute })
	c := f.ts.dial(t)
	r := login(t, c, "alice", "secret")
	if r.SessionLifetimeMillis != 60000 {
		t.Fatalf("SessionLifetimeMs %d, want 60000", r.SessionLifetimeMillis)
	}
	f.advance(50 * time.Second)
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat within the session: %d", code)
	}
	// Re-authenticate before expiry: a fresh lifetime.
	if r := login(t, c, "alice", "secret"); r.SessionLifetimeMillis != 60000 {
		t.Fatalf("re-authentication lifetime %d", r.SessionLifetimeMillis)
	}
	f.advance(50 * time.Second) // 100s after the first login, 50s after the second
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat after re-authentication: %d", code)
	}
	f.advance(11 * time.Second) // past the second session
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group = "g"
	c.send(req, 9)
	c.expectClosed()
}

func TestSASLSessionCappedByCredentialExpiry(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.SessionLifetime = time.Hour })
	f.mech.expiry = time.Unix(0, f.now.Load()).Add(90 * time.Second)
	c := f.ts.dial(t)
	if r := login(t, c, "alice", "secret"); r.SessionLifetimeMillis != 90000 {
		t.Fatalf("SessionLifetimeMs %d, want the token's 90000", r.SessionLifetimeMillis)
	}
}

// A credential's own expiry ends the session even with no lifetime
// configured, as in Kafka: an OAUTHBEARER connection does not outlive its
// token. (cohort applied the expiry only under a configured lifetime.)
func TestSASLSessionEndsAtCredentialExpiryWithoutLifetime(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	f.mech.expiry = time.Unix(0, f.now.Load()).Add(90 * time.Second)
	c := f.ts.dial(t)
	if r := login(t, c, "alice", "secret"); r.SessionLifetimeMillis != 90000 {
		t.Fatalf("SessionLifetimeMs %d, want the token's 90000", r.SessionLifetimeMillis)
	}
	f.advance(80 * time.Second)
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat before the token expires: %d", code)
	}
	f.advance(11 * time.Second)
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group = "g"
	c.send(req, 9)
	c.expectClosed()
}

// A SaslHandshake on an authenticated connection whose session does not
// expire is refused with ILLEGAL_SASL_STATE and the connection kept, as
// Kafka answers it; the principal stays. (cohort ran a re-authentication.)
func TestSASLHandshakeWithoutSessionToRenew(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	c := f.ts.dial(t)
	if r := login(t, c, "alice", "secret"); r.SessionLifetimeMillis != 0 {
		t.Fatalf("SessionLifetimeMs %d without a lifetime", r.SessionLifetimeMillis)
	}
	if h := handshake(t, c, 1, "TEST"); h.ErrorCode != errIllegalSaslState {
		t.Fatalf("handshake after login: error %d, want ILLEGAL_SASL_STATE", h.ErrorCode)
	}
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat after the refused handshake: %d", code)
	}
}

// A connection re-authenticates at most once a second, as in Kafka: a
// SaslHandshake less than a second after the previous re-authentication
// began is refused with ILLEGAL_SASL_STATE and the connection kept; a
// second later it is accepted.
func TestSASLReauthenticationAtMostOncePerSecond(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.SessionLifetime = time.Minute })
	c := f.ts.dial(t)
	login(t, c, "alice", "secret")
	login(t, c, "alice", "secret") // the first re-authentication: at once after login is fine
	f.advance(900 * time.Millisecond)
	if h := handshake(t, c, 1, "TEST"); h.ErrorCode != errIllegalSaslState {
		t.Fatalf("re-authentication 0.9 s after the previous: error %d, want ILLEGAL_SASL_STATE", h.ErrorCode)
	}
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat after the refused handshake: %d", code)
	}
	f.advance(100 * time.Millisecond)
	if r := login(t, c, "alice", "secret"); r.ErrorCode != 0 || r.SessionLifetimeMillis != 60000 {
		t.Fatalf("re-authentication 1 s after the previous: error %d, lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
	}
}

// A SaslHandshake that cannot begin a re-authentication (less than a second
// after the previous one began) on a connection whose session has expired
// closes the connection without an answer, as in Kafka, which treats it as
// any other request after the expiry. (cohort answered ILLEGAL_SASL_STATE
// and kept the expired connection.)
func TestSASLExpiredSessionHandshakeTooSoonCloses(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.SessionLifetime = time.Minute })
	f.mech.expiry = time.Unix(0, f.now.Load()).Add(60500 * time.Millisecond)
	c := f.ts.dial(t)
	login(t, c, "alice", "secret")
	f.advance(59800 * time.Millisecond)
	if r := login(t, c, "alice", "secret"); r.SessionLifetimeMillis != 700 {
		t.Fatalf("re-authentication's lifetime %d ms, want the credential's remaining 700", r.SessionLifetimeMillis)
	}
	f.advance(800 * time.Millisecond) // expired, 0.8 s after the re-authentication began
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(1)
	req.Mechanism = "TEST"
	c.send(req, 5)
	c.expectClosed()
}

func TestSASLReauthenticationCannotChangePrincipal(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.SessionLifetime = time.Minute })
	c := f.ts.dial(t)
	login(t, c, "alice", "secret")
	handshake(t, c, 1, "TEST")
	authenticate(t, c, 2, "bob:hunter2")
	r := authenticate(t, c, 2, "ok")
	if r.ErrorCode != errSaslAuthenticationFailed {
		t.Fatalf("re-authentication as bob: error %d, want SASL_AUTHENTICATION_FAILED", r.ErrorCode)
	}
	c.expectClosed()
}

// A re-authentication may not change the mechanism. As in Kafka, the
// handshake naming another enabled mechanism is answered without error,
// and the next request (its SaslAuthenticate) closes the connection
// without an answer, counted as a failed authentication of that mechanism;
// a mechanism the node does not enable is UNSUPPORTED_SASL_MECHANISM at the
// handshake, as for a first authentication. (cohort refused the handshake
// with ILLEGAL_SASL_STATE.)
func TestSASLReauthenticationCannotChangeMechanism(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) {
		s.SessionLifetime = time.Minute
		s.Mechanisms["OTHER"] = &testMech{users: map[string]string{"alice": "secret"}}
	})
	c := f.ts.dial(t)
	login(t, c, "alice", "secret")
	if h := handshake(t, c, 1, "OTHER"); h.ErrorCode != 0 {
		t.Fatalf("re-authentication handshake with another enabled mechanism: error %d, want none", h.ErrorCode)
	}
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(2)
	req.SASLAuthBytes = []byte("alice:secret")
	c.send(req, 7)
	c.expectClosed()
	if n := f.authCount("OTHER", "failure"); n != 1 {
		t.Errorf("failed authentications of OTHER: %v, want 1", n)
	}

	c2 := f.ts.dial(t)
	login(t, c2, "alice", "secret")
	if h := handshake(t, c2, 1, "NOPE"); h.ErrorCode != errUnsupportedSaslMechanism {
		t.Fatalf("re-authentication handshake with a mechanism not enabled: error %d, want UNSUPPORTED_SASL_MECHANISM", h.ErrorCode)
	}
	c2.expectClosed()
}

func TestSASLDeletedUserCannotReauthenticate(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.SessionLifetime = time.Minute })
	c := f.ts.dial(t)
	login(t, c, "alice", "secret")
	f.mech.setUser("alice", "")
	handshake(t, c, 1, "TEST")
	if r := authenticate(t, c, 2, "alice:secret"); r.ErrorCode != errSaslAuthenticationFailed {
		t.Fatalf("re-authentication of a deleted user: error %d", r.ErrorCode)
	}
	c.expectClosed()
}

func TestSASLHugeTokenFails(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	c := f.ts.dial(t)
	handshake(t, c, 1, "TEST")
	r := authenticate(t, c, 2, strings.Repeat("x", maxSaslTokenBytes+1))
	if r.ErrorCode != errSaslAuthenticationFailed {
		t.Fatalf("huge token: error %d", r.ErrorCode)
	}
	c.expectClosed()
	// v0 raw framing: the size alone is refused.
	c2 := f.ts.dial(t)
	handshake(t, c2, 0, "TEST")
	c2.writeRaw([]byte{0x7f, 0, 0, 0})
	c2.expectClosed()
}

func TestSASLStalledExchangeTimesOut(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.AuthTimeout = 200 * time.Millisecond })
	c := f.ts.dial(t)
	handshake(t, c, 1, "TEST")
	// Send nothing more: the server must close within the timeout.
	c.expectClosed()
}

func TestTLSHandshakeStallTimesOut(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "server")
	f := startAuthServer(t, ProtocolSSL, &tls.Config{Certificates: []tls.Certificate{pair.TLS}}, func(s *Security) {
		s.AuthTimeout = 200 * time.Millisecond
	})
	c := f.ts.dial(t)
	c.writeRaw([]byte{0x16, 0x03}) // the start of a ClientHello, then nothing
	c.expectClosed()
}

func TestPlaintextToTLSListenerAndReverse(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "server")
	f := startAuthServer(t, ProtocolSSL, &tls.Config{Certificates: []tls.Certificate{pair.TLS}}, nil)
	// A Kafka request in clear text to the TLS port: closed.
	c := f.ts.dial(t)
	c.send(kmsg.NewPtrApiVersionsRequest(), 1)
	c.expectClosed()
	// TLS to a PLAINTEXT port: the ClientHello's first bytes read as an
	// absurd frame size; the TLS client's handshake fails and the server
	// stays healthy.
	plain := startServer(t)
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", plain.addr, ca.ClientConfig(nil))
	if err == nil {
		tc.Close()
		t.Fatal("TLS handshake with a PLAINTEXT listener succeeded")
	}
	if code := heartbeat(t, plain.dial(t)); code != 0 {
		t.Fatalf("PLAINTEXT listener after a TLS client: %d", code)
	}
}

func TestMTLSPrincipal(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "server")
	srvCfg := &tls.Config{Certificates: []tls.Certificate{pair.TLS}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	f := startAuthServer(t, ProtocolSSL, srvCfg, nil)
	client := ca.Client(t, pkix.Name{CommonName: "carol", OrganizationalUnit: []string{"eng"}})
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", f.ts.addr, ca.ClientConfig(&client))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := &rawConn{t: t, nc: nc}
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	if got := f.lastPrincipal(); got != "User:carol" {
		t.Fatalf("principal %q, want User:carol", got)
	}
	if n := f.authCount("SSL", "success"); n != 1 {
		t.Fatalf("SSL success count %v", n)
	}
	// Without a client certificate: the handshake fails.
	nc2, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", f.ts.addr, ca.ClientConfig(nil))
	if err == nil {
		nc2.SetDeadline(time.Now().Add(5 * time.Second))
		// TLS 1.3 reports the missing certificate on the first read.
		c2 := &rawConn{t: t, nc: nc2}
		c2.send(kmsg.NewPtrApiVersionsRequest(), 1)
		if _, _, err := c2.recvFrame(); err == nil {
			t.Fatal("a client without a certificate was served")
		}
		nc2.Close()
	}
}

func TestSSLWithoutClientCertIsAnonymous(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "server")
	f := startAuthServer(t, ProtocolSSL, &tls.Config{Certificates: []tls.Certificate{pair.TLS}}, nil)
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", f.ts.addr, ca.ClientConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	heartbeat(t, &rawConn{t: t, nc: nc})
	if got := f.lastPrincipal(); got != Anonymous {
		t.Fatalf("principal %q, want %s", got, Anonymous)
	}
}

func TestListenerConfigErrors(t *testing.T) {
	g, topo := newFakeGroups(), SingleNode(Broker{}, "c")
	mech := map[string]sasl.Mechanism{"TEST": &testMech{}}
	for name, cfg := range map[string]Config{
		"SSL without TLS":        {Listeners: []Listener{{Protocol: ProtocolSSL, Addr: "127.0.0.1:0"}}},
		"PLAINTEXT with TLS":     {Listeners: []Listener{{Protocol: ProtocolPlaintext, Addr: "127.0.0.1:0", TLS: &tls.Config{}}}},
		"SASL without mechanism": {Listeners: []Listener{{Protocol: ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}},
		"unknown protocol":       {Listeners: []Listener{{Protocol: "QUIC", Addr: "127.0.0.1:0"}}},
		"duplicate names": {Listeners: []Listener{{Protocol: ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}, {Protocol: ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}},
			Security: &Security{Mechanisms: mech}},
		"Listen and Listeners": {Listen: "127.0.0.1:0", Listeners: []Listener{{Protocol: ProtocolPlaintext, Addr: "127.0.0.1:0"}}},
	} {
		cfg.Groups, cfg.Topology = g, topo
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func TestListenerEndpointsInMetadataAndFindCoordinator(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	f.ts.topo.SetSelf(Broker{NodeID: 0, Host: "127.0.0.1", Port: 1, Endpoints: []Endpoint{
		{Listener: ProtocolPlaintext, Host: "plain.example", Port: 9092},
		{Listener: ProtocolSASLPlaintext, Host: "sasl.example", Port: 9094},
	}})
	c := f.ts.dial(t)
	login(t, c, "alice", "secret")
	md := c.roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if len(md.Brokers) != 1 || md.Brokers[0].Host != "sasl.example" || md.Brokers[0].Port != 9094 {
		t.Fatalf("Metadata brokers %+v, want the SASL_PLAINTEXT endpoint", md.Brokers)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	r := c.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
	if r.ErrorCode != 0 || r.Host != "sasl.example" || r.Port != 9094 {
		t.Fatalf("FindCoordinator %+v", r)
	}
	// A node without an endpoint on this listener is not offered.
	f.ts.topo.SetSelf(Broker{NodeID: 0, Host: "127.0.0.1", Port: 1, Endpoints: []Endpoint{{Listener: ProtocolPlaintext, Host: "p", Port: 1}}})
	r = c.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
	if r.ErrorCode != errCoordinatorNotAvailable {
		t.Fatalf("FindCoordinator without an endpoint: error %d", r.ErrorCode)
	}
	md = c.roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if len(md.Brokers) != 0 {
		t.Fatalf("Metadata lists %+v without an endpoint for the listener", md.Brokers)
	}
	// A partition whose leader has no endpoint on the listener: from v6
	// LISTENER_NOT_FOUND, before it LEADER_NOT_AVAILABLE (Kafka's two
	// answers).
	createTopic(t, f.ts.srv.catalog, "t", 2, nil)
	for _, tc := range []struct {
		version int16
		want    int16
	}{{5, errLeaderNotAvailable}, {6, errListenerNotFound}, {12, errListenerNotFound}} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = tc.version
		md = c.roundTrip(req).(*kmsg.MetadataResponse)
		if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 2 {
			t.Fatalf("v%d: topics %+v", tc.version, md.Topics)
		}
		for _, p := range md.Topics[0].Partitions {
			if p.ErrorCode != tc.want || p.Leader != -1 {
				t.Fatalf("v%d: partition %d error %d leader %d, want error %d and no leader", tc.version, p.Partition, p.ErrorCode, p.Leader, tc.want)
			}
		}
	}
	// With the endpoint back, the partitions have their leader again.
	f.ts.topo.SetSelf(Broker{NodeID: 0, Host: "127.0.0.1", Port: 1, Endpoints: []Endpoint{{Listener: ProtocolSASLPlaintext, Host: "s", Port: 2}}})
	md = c.roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if p := md.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Leader != 0 {
		t.Fatalf("with an endpoint: partition %+v", p)
	}
}

// A SaslAuthenticate with no exchange to take part in (a listener without
// SASL, or a connection already authenticated) is answered
// ILLEGAL_SASL_STATE and the connection stays open, as Kafka does. (cohort
// closed it.)
func TestSaslAuthenticateOnPlaintextKeepsConnection(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	if r := authenticate(t, c, 1, "x"); r.ErrorCode != errIllegalSaslState {
		t.Fatalf("error %d, want ILLEGAL_SASL_STATE", r.ErrorCode)
	}
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
}

func TestSaslAuthenticateAfterAuthKeepsConnection(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
	c := f.ts.dial(t)
	login(t, c, "alice", "secret")
	if r := authenticate(t, c, 1, "x"); r.ErrorCode != errIllegalSaslState {
		t.Fatalf("error %d, want ILLEGAL_SASL_STATE", r.ErrorCode)
	}
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
}

// TestSASLFrameLimitBeforeAuthentication: before a SASL connection has
// authenticated, a frame over 512 KiB (and the room for a request header)
// closes it without reading the frame, as Kafka's sasl.server.max.receive.size;
// after authentication, and while an authenticated connection
// re-authenticates, the node's request limit applies.
func TestSASLFrameLimitBeforeAuthentication(t *testing.T) {
	over := func(c *rawConn) {
		var size [4]byte
		binary.BigEndian.PutUint32(size[:], maxUnauthenticatedFrameBytes+1)
		c.writeRaw(size[:])
		c.writeRaw(make([]byte, 1024)) // the rest never comes
		c.expectClosed()
	}
	for name, prep := range map[string]func(*rawConn){
		"before handshake": func(*rawConn) {},
		"after handshake":  func(c *rawConn) { handshake(t, c, 1, "TEST") },
		"mid exchange": func(c *rawConn) {
			handshake(t, c, 1, "TEST")
			authenticate(t, c, 2, "alice:secret")
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil)
			c := f.ts.dial(t)
			prep(c)
			over(c)
			if got := testutil.ToFloat64(f.ts.srv.metrics.protocolErrors.WithLabelValues("frame_size")); got != 1 {
				t.Fatalf("frame_size protocol errors %v, want 1", got)
			}
		})
	}

	// Authenticated: a request well over 512 KiB is served.
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.SessionLifetime = time.Minute })
	c := f.ts.dial(t)
	login(t, c, "alice", "secret")
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(1)
	for i := range 6000 {
		tp := kmsg.NewMetadataRequestTopic()
		tp.Topic = kmsg.StringPtr(fmt.Sprintf("%0100d", i))
		md.Topics = append(md.Topics, tp)
	}
	if n := len(kmsg.NewRequestFormatter().AppendRequest(nil, md, 1)); n <= maxUnauthenticatedFrameBytes {
		t.Fatalf("test request is only %d bytes", n)
	}
	if resp := c.roundTrip(md).(*kmsg.MetadataResponse); len(resp.Topics) != 6000 {
		t.Fatalf("authenticated large Metadata: %d topics answered", len(resp.Topics))
	}
	// Re-authenticating: the connection is still trusted with large
	// frames; a token over the SASL limit is refused by the answer.
	handshake(t, c, 1, "TEST")
	r := authenticate(t, c, 2, strings.Repeat("x", maxUnauthenticatedFrameBytes+1))
	if r.ErrorCode != errSaslAuthenticationFailed {
		t.Fatalf("huge token while re-authenticating: error %d", r.ErrorCode)
	}
	c.expectClosed()
}

// TestStalledFramesHoldLittle: a frame or raw SASL token announced at its
// limit and never sent costs the buffer of what arrived, not of what was
// announced (before authentication the direct buffer is 4 KiB).
func TestStalledFramesHoldLittle(t *testing.T) {
	for _, direct := range []int32{4 << 10, 64 << 10} {
		buf, err := readFrame(bytes.NewReader(make([]byte, 100)), maxSaslTokenBytes, direct)
		if err == nil {
			t.Fatal("a short frame read whole")
		}
		if len(buf) != 100 || cap(buf) > 2*int(direct) {
			t.Errorf("direct %d: a %d-byte frame stalled after 100 bytes holds a buffer of %d (cap %d)", direct, maxSaslTokenBytes, len(buf), cap(buf))
		}
	}
	var c conn
	c.auth.state = saslRaw
	if d := c.directFrameBytes(); d != 4<<10 {
		t.Errorf("direct buffer before authentication: %d", d)
	}
	c.auth.reauth = true
	if d := c.directFrameBytes(); d != 64<<10 {
		t.Errorf("direct buffer while re-authenticating: %d", d)
	}
}

// TestSASLUnreadAnswersTimeOut: before authentication a client that
// pipelines requests and never reads the answers (the connection blocks in
// a write) is disconnected at the authentication timeout too.
func TestSASLUnreadAnswersTimeOut(t *testing.T) {
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.AuthTimeout = 300 * time.Millisecond })
	c := f.ts.dial(t)
	req := kmsg.NewPtrApiVersionsRequest()
	one := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, 1)
	batch := bytes.Repeat(one, 10000)
	done := make(chan error, 1)
	go func() {
		for range 100 { // up to 1M requests, far more than the socket buffers hold answers for
			if _, err := c.nc.Write(batch); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the server took a million requests without its answers being read")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("connection still open 10 s after a 300 ms authentication timeout")
	}
}

// TestAuthFailureLogBurst: failed authentications are logged at most
// burstLogMax lines per window over all connections (a password guesser
// logged one line per attempt, hundreds a second), on their own budget,
// apart from the bad-request lines.
func TestAuthFailureLogBurst(t *testing.T) {
	var buf bytes.Buffer
	s := &Server{}
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for i := range 3 {
		c := &conn{s: s, log: log.With("conn", i)}
		for range 20 {
			c.logAuthFailure("authentication failed", "mechanism", "PLAIN")
		}
	}
	if n := strings.Count(buf.String(), "authentication failed"); n != burstLogMax {
		t.Fatalf("%d lines for 60 failures, want %d:\n%s", n, burstLogMax, buf.String())
	}
	if ok, _ := s.badLog.Allow(time.Now()); !ok {
		t.Fatal("the auth failures used up the bad-request lines' budget")
	}
}

// TestFailedAuthDelayZeroAndNegative: a Security's FailedAuthDelay of 0 is
// the default, Kafka's 100ms; a negative one is no wait at all, which
// cohort serve --failed-auth-delay 0 asks for (Kafka's
// connection.failed.authentication.delay.ms=0). A wrong password is still
// refused and its connection closed.
func TestFailedAuthDelayZeroAndNegative(t *testing.T) {
	for _, c := range []struct {
		set, want time.Duration
	}{{0, DefaultFailedAuthDelay}, {-1, 0}, {5 * time.Millisecond, 5 * time.Millisecond}} {
		f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.FailedAuthDelay = c.set })
		if got := f.ts.srv.FailedAuthDelay(); got != c.want {
			t.Errorf("FailedAuthDelay %v: the server waits %v, want %v", c.set, got, c.want)
		}
		conn := f.ts.dial(t)
		handshake(t, conn, 1, "TEST")
		if r := authenticate(t, conn, 2, "alice:wrong"); r.ErrorCode != errSaslAuthenticationFailed {
			t.Fatalf("FailedAuthDelay %v: error %d, want SASL_AUTHENTICATION_FAILED", c.set, r.ErrorCode)
		}
		conn.expectClosed()
	}
}

// TestSessionExpiryLogBurst: "closing connection: SASL session expired
// without re-authentication" is logged at most burstLogMax times a window
// over all connections, on the session clock, and the first line of the
// next window says how many were left out. A fleet of clients that never
// re-authenticate (or a client opening connections with short sessions)
// logged one line per connection without bound.
func TestSessionExpiryLogBurst(t *testing.T) {
	const conns = burstLogMax + 5
	const msg = "SASL session expired without re-authentication"
	buf := &testlog.Buffer{}
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, func(s *Security) { s.SessionLifetime = time.Minute },
		func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(buf, nil)) })
	expire := func(n int) {
		cs := make([]*rawConn, n)
		for i := range cs {
			cs[i] = f.ts.dial(t)
			login(t, cs[i], "alice", "secret")
		}
		f.advance(time.Minute)
		for _, c := range cs {
			req := kmsg.NewPtrHeartbeatRequest()
			req.Group = "g"
			c.send(req, 9)
			c.expectClosed() // after the line, if it is logged
		}
	}
	expire(conns)
	if n := strings.Count(buf.String(), msg); n != burstLogMax {
		t.Fatalf("%d session-expiry lines for %d connections in one window, want %d:\n%s", n, conns, burstLogMax, buf.String())
	}
	f.advance(burstLogWindow) // the next window, on the injected clock
	before := len(buf.String())
	expire(1)
	line := buf.String()[before:]
	if !strings.Contains(line, msg) || !strings.Contains(line, fmt.Sprintf("unlogged_before=%d", conns-burstLogMax)) {
		t.Fatalf("first session-expiry line of the next window %q, want one with unlogged_before=%d", line, conns-burstLogMax)
	}
}

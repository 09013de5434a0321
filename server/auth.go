package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/security/principal"
	"github.com/cohort-dev/cohort/security/sasl"
)

// Kafka error codes of authentication.
const (
	errUnsupportedSaslMechanism int16 = 33
	errIllegalSaslState         int16 = 34
	errSaslAuthenticationFailed int16 = 58
)

// Defaults of Security's timings.
const (
	DefaultFailedAuthDelay = 100 * time.Millisecond // Kafka's connection.failed.authentication.delay.ms
	DefaultAuthTimeout     = 10 * time.Second
)

// maxSaslTokenBytes bounds one SASL token (a raw v0 frame or a
// SaslAuthenticate's AuthBytes). SCRAM messages are a few hundred bytes and
// an OAUTHBEARER JWT a few KiB; Kafka's SASL servers refuse tokens above
// 512 KiB before authentication for the same reason: an unauthenticated
// client must not make the server buffer much.
const maxSaslTokenBytes = 512 << 10

// maxUnauthenticatedFrameBytes bounds every request frame a SASL listener
// reads before the connection is authenticated (ApiVersions, SaslHandshake,
// SaslAuthenticate), as Kafka's sasl.server.max.receive.size (512 KiB by
// default) does: without it, anyone who can reach the port could make the
// node buffer and decode up to the request limit (100 MiB by default) per
// connection without knowing a credential. Re-authentication is not bounded
// by it: that client already proved who it is.
const maxUnauthenticatedFrameBytes = maxSaslTokenBytes + 4<<10

// unauthenticated reports whether the connection is on a SASL listener and
// has not authenticated yet.
func (a *connAuth) unauthenticated() bool {
	switch a.state {
	case saslHandshake:
		return true
	case saslAuthenticate, saslRaw:
		return !a.reauth
	}
	return false
}

// securityRuntime is the server's view of Config.Security with defaults
// applied; a zero value means no security.
type securityRuntime struct {
	cfg        *Security
	mechNames  []string // enabled mechanisms, sorted
	failDelay  time.Duration
	timeout    time.Duration
	lifetime   time.Duration
	now        func() time.Time
	principals func(*x509.Certificate) (string, error)
}

func newSecurityRuntime(cfg *Security) securityRuntime {
	r := securityRuntime{cfg: cfg, failDelay: DefaultFailedAuthDelay, timeout: DefaultAuthTimeout, now: time.Now,
		principals: cnPrincipal}
	if cfg == nil {
		return r
	}
	for name := range cfg.Mechanisms {
		r.mechNames = append(r.mechNames, name)
	}
	sort.Strings(r.mechNames)
	r.failDelay = EffectiveFailedAuthDelay(cfg.FailedAuthDelay)
	if cfg.AuthTimeout > 0 {
		r.timeout = cfg.AuthTimeout
	}
	r.lifetime = cfg.SessionLifetime
	if cfg.Now != nil {
		r.now = cfg.Now
	}
	if cfg.PrincipalOf != nil {
		r.principals = cfg.PrincipalOf
	}
	return r
}

// cnPrincipal is the default principal of a client certificate: User:<CN>,
// refused without a CN or with several (principal.FromCertificate).
func cnPrincipal(cert *x509.Certificate) (string, error) {
	return principal.FromCertificate(cert, nil)
}

// saslState is where a connection is in its SASL exchange.
type saslState uint8

const (
	saslNone         saslState = iota // not a SASL listener
	saslHandshake                     // waiting for SaslHandshake (ApiVersions allowed)
	saslAuthenticate                  // handshake v1 done: waiting for SaslAuthenticate
	saslRaw                           // handshake v0 done: raw tokens until done
	saslDone                          // authenticated
	// saslBadMech: a re-authentication's handshake named another mechanism
	// than the connection's. Kafka answers that handshake and fails the
	// re-authentication at the next request, closing the connection
	// without an answer (so that its failed re-authentication is counted).
	saslBadMech
)

// connAuth is a connection's authentication state, touched only by the
// connection's goroutine.
type connAuth struct {
	state     saslState
	principal string
	mech      string
	sess      sasl.Session
	reauth    bool      // a KIP-368 re-authentication is under way
	authV1    bool      // the client authenticated with SaslAuthenticate v1+ (may re-authenticate)
	expires   time.Time // session end (KIP-368); zero: none
	started   time.Time // when the current exchange began
	deadline  time.Time // when the current exchange must be done (the socket's deadline)
	reauthAt  time.Time // when the last re-authentication began; zero: none yet
	badMech   string    // saslBadMech: the mechanism the re-authentication asked for
}

// minReauthInterval is the least time between the starts of two
// re-authentications of a connection, Kafka's: a SaslHandshake sooner is
// refused as when there is no session to renew.
const minReauthInterval = time.Second

// handshakeTLS completes the TLS handshake of a new connection by the
// connection's authentication deadline and sets the certificate's
// principal.
func (c *conn) handshakeTLS() error {
	tc := c.nc.(*tls.Conn)
	ctx, cancel := context.WithDeadline(c.ctx, c.auth.deadline)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if refusedServerCertificate(err) {
			return fmt.Errorf("TLS handshake: the client refused the node's certificate (%w): does the client trust the CA "+
				"that issued it, and does the certificate hold the name or address the client connects to?", err)
		}
		return fmt.Errorf("TLS handshake: %w", err)
	}
	st := tc.ConnectionState()
	if len(st.PeerCertificates) > 0 && c.l.Protocol == ProtocolSSL {
		p, err := c.s.sec.principals(st.PeerCertificates[0])
		if err != nil {
			return fmt.Errorf("client certificate: %w", err) // err names the DN as rules see it
		}
		c.auth.principal = p
	}
	return nil
}

// refusedServerCertificate reports whether a failed server handshake ended
// with the client's alert about a certificate: the only certificate the
// client has seen is the node's, so the client refused it (Go clients send
// "bad certificate" for an unknown CA or a wrong name, Java clients
// "certificate unknown"). Go reports a peer's alert as a net.OpError "remote
// error" whose text is the alert's name.
func refusedServerCertificate(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return false
	}
	switch op.Err.Error() {
	case "tls: bad certificate", "tls: unsupported certificate", "tls: revoked certificate", "tls: expired certificate",
		"tls: unknown certificate", "tls: unknown certificate authority":
		return true
	}
	return false
}

// startAuth prepares a new connection: TLS handshake, and on SASL
// listeners a deadline by which the client must have authenticated.
// false closes the connection.
//
// The authentication timeout runs from here for the whole unauthenticated
// phase: on a SASL_SSL listener the TLS handshake and the SASL exchange
// share it, so that a client that knows no credential holds the
// connection for one timeout, not for one per step.
func (c *conn) startAuth() bool {
	c.auth.principal = Anonymous
	c.auth.deadline = time.Now().Add(c.s.sec.timeout)
	if c.l.IsTLS() {
		if err := c.handshakeTLS(); err != nil {
			if c.ctx.Err() == nil {
				c.logAuthFailure("closing connection: authentication failed", "reason", err.Error())
				c.lm.authResult("SSL", false)
			}
			return false
		}
		if c.l.Protocol == ProtocolSSL {
			c.lm.authResult("SSL", true)
		}
	}
	if c.l.IsSASL() {
		c.auth.state = saslHandshake
		c.auth.started = c.s.sec.now()
		// Reads and writes: a client that pipelines requests and never
		// reads the answers blocks the connection in a write, and must not
		// outlive the authentication deadline either.
		c.nc.SetDeadline(c.auth.deadline)
	}
	return true
}

// admit decides whether request r may be served in the connection's
// current authentication state: false closes the connection (Kafka closes a
// SASL connection that sends anything but ApiVersions and the SASL requests
// before it is authenticated, or after its session expired).
func (c *conn) admit(r *request) bool {
	switch c.auth.state {
	case saslNone:
		return true
	case saslHandshake:
		if r.key == keyApiVersions || r.key == keySaslHandshake {
			return true
		}
	case saslAuthenticate:
		if r.key == keySaslAuthenticate {
			return true
		}
	case saslBadMech:
		c.logAuthFailure("closing connection: re-authentication failed",
			"principal", c.auth.principal, "reason", fmt.Sprintf("SASL mechanism %s asked for the re-authentication of a %s session", c.auth.badMech, c.auth.mech))
		c.lm.authResult(c.auth.badMech, false)
		return false
	case saslDone:
		expired := !c.auth.expires.IsZero() && !c.s.sec.now().Before(c.auth.expires)
		if r.key == keySaslHandshake && (!expired || c.reauthMayBegin()) {
			return true // a re-authentication, or refused in saslHandshake
		}
		if !expired {
			return true
		}
		// At most burstLogMax lines a window over all connections, on the
		// session clock: every connection of clients that never
		// re-authenticate ends this way.
		c.s.expiryLog.Log(c.logger(), slog.LevelInfo, c.s.sec.now(), "closing connection: SASL session expired without re-authentication",
			"principal", c.auth.principal, "expired", c.auth.expires)
		c.s.metrics.protocolError("session_expired")
		return false
	}
	c.logAuthFailure("closing connection: request before SASL authentication completed",
		"api", kmsg.NameForKey(r.key), "client_id", sasl.LogText(r.clientID))
	c.s.metrics.protocolError("unauthenticated_request")
	return false
}

// refusalAnswer is the answer to a request admit refused, written before
// the connection closes, or nil to close without one. Kafka answers a request
// other than SaslAuthenticate in the middle of a SaslAuthenticate exchange
// with that request's error response, ILLEGAL_SASL_STATE, and then closes;
// anything else it refuses (before the SaslHandshake, or after the session
// expired) it closes without an answer. cohort answers where the response
// has a place for the error: a group-scoped API's error response, or any
// response with a top-level error code in its version (the others, such as Metadata or
// Produce, report errors only per topic or partition, and get none).
func (c *conn) refusalAnswer(r *request) kmsg.Response {
	if c.auth.state != saslAuthenticate || r.req == nil {
		return nil
	}
	if resp := group.ErrorResponse(r.req, errIllegalSaslState); resp != nil {
		return resp
	}
	resp := r.req.ResponseKind()
	v := reflect.ValueOf(resp).Elem()
	code := v.FieldByName("ErrorCode")
	if !code.IsValid() || code.Kind() != reflect.Int16 {
		return nil
	}
	without := resp.AppendTo(nil)
	code.SetInt(int64(errIllegalSaslState))
	if bytes.Equal(resp.AppendTo(nil), without) {
		return nil // the field is not in this version (Metadata's before v13)
	}
	if msg := v.FieldByName("ErrorMessage"); msg.IsValid() && msg.Type() == reflect.TypeFor[*string]() {
		msg.Set(reflect.ValueOf(kmsg.StringPtr("Unexpected " + kmsg.NameForKey(r.key) + " request during SASL authentication")))
	}
	return resp
}

// reauthMayBegin reports whether a SaslHandshake on the authenticated
// connection may begin a re-authentication, as Kafka decides before it
// looks at the handshake: the session expires, and the previous
// re-authentication began at least minReauthInterval ago.
func (c *conn) reauthMayBegin() bool {
	return !c.auth.expires.IsZero() && (c.auth.reauthAt.IsZero() || c.s.sec.now().Sub(c.auth.reauthAt) >= minReauthInterval)
}

// saslHandshake answers a SaslHandshake. close: the connection ends after
// the response is written (an unsupported mechanism, as Kafka).
func (c *conn) saslHandshake(r *request) (resp kmsg.Response, close bool) {
	req := r.req.(*kmsg.SASLHandshakeRequest)
	out := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	out.SupportedMechanisms = c.s.sec.mechNames
	switch {
	case c.auth.state == saslHandshake:
	case c.auth.state == saslDone && !c.reauthMayBegin():
		// A session that does not expire has nothing to renew, and a
		// connection re-authenticates at most once a second: Kafka
		// answers such a handshake as an ordinary request, refused,
		// keeping the connection (unless its session has expired:
		// admit closed it then, as Kafka closes an expired connection
		// on any request that does not begin a re-authentication).
		out.ErrorCode = errIllegalSaslState
		return out, false
	case c.auth.state == saslDone && c.auth.authV1 && req.GetVersion() >= 1:
		c.auth.reauth, c.auth.reauthAt = true, c.s.sec.now()
	case c.auth.state == saslNone:
		// A client set up for SASL on a listener without it: Kafka
		// answers ILLEGAL_SASL_STATE and keeps the connection, and the
		// client gives up. Said and counted here, or the operator
		// looking for why it never gets in finds nothing.
		c.logAuthFailure("refusing SaslHandshake on a listener without SASL (is the client set up for SASL_PLAINTEXT or SASL_SSL?)",
			"mechanism", sasl.LogText(req.Mechanism), "protocol", c.l.Protocol)
		c.lm.authResult("", false) // "other": the listener offers no mechanism
		out.ErrorCode = errIllegalSaslState
		return out, false
	default:
		out.ErrorCode = errIllegalSaslState
		return out, true
	}
	m, ok := c.s.sec.cfg.Mechanisms[req.Mechanism]
	if !ok {
		c.logAuthFailure("closing connection: unsupported SASL mechanism", "mechanism", sasl.LogText(req.Mechanism), "enabled", strings.Join(c.s.sec.mechNames, ","))
		c.lm.authResult(req.Mechanism, false)
		out.ErrorCode = errUnsupportedSaslMechanism
		return out, true
	}
	if c.auth.reauth && req.Mechanism != c.auth.mech {
		// An enabled mechanism, but not the connection's: answered as
		// Kafka does, and failed at the next request (admit).
		c.auth.state = saslBadMech
		c.auth.badMech = req.Mechanism
		c.setAuthDeadline()
		return out, false
	}
	c.auth.mech = req.Mechanism
	c.auth.sess = m.Start()
	c.auth.started = c.s.sec.now()
	if req.GetVersion() == 0 {
		c.auth.state = saslRaw
	} else {
		c.auth.state = saslAuthenticate
	}
	if c.auth.reauth {
		c.setAuthDeadline()
	}
	return out, false
}

// setAuthDeadline gives the exchange starting now the authentication
// timeout, on the socket (reads and writes) and for the session's waits.
func (c *conn) setAuthDeadline() {
	c.auth.deadline = time.Now().Add(c.s.sec.timeout)
	c.nc.SetDeadline(c.auth.deadline)
}

// step runs the session's Step. A session that may wait before its work
// (PLAIN, for a slot to check a password in) is given up at the exchange's
// deadline or when the client hangs up, watched for as a parked request
// is: a burst of guesses from clients that then left must not keep the
// password checks busy, and everyone else's logins waiting, long after.
func (c *conn) step(token []byte) ([]byte, bool, error) {
	cs, ok := c.auth.sess.(sasl.ContextStepper)
	if !ok {
		return c.auth.sess.Step(token)
	}
	ctx, cancel := context.WithDeadline(c.ctx, c.auth.deadline)
	defer cancel()
	if c.external {
		c.startWatch()
		defer func() {
			c.stopWatch()
			c.nc.SetReadDeadline(c.auth.deadline) // stopWatch cleared it
		}()
	}
	return cs.StepContext(ctx, token)
}

// saslStep feeds one client token to the session. It returns the server's
// token and whether the exchange succeeded (done), or an error after which
// the connection must be closed (the failure was logged and delayed).
func (c *conn) saslStep(token []byte) (out []byte, done bool, err error) {
	if len(token) > maxSaslTokenBytes {
		err = fmt.Errorf("%w: a %d-byte token, the limit is %d", sasl.ErrAuthFailed, len(token), maxSaslTokenBytes)
	} else {
		out, done, err = c.step(token)
	}
	if err == nil && done {
		p := c.auth.sess.Principal()
		if c.auth.reauth && p != c.auth.principal {
			err = fmt.Errorf("%w: re-authentication as %s on a connection of %s (a principal cannot change)", sasl.ErrAuthFailed, p, c.auth.principal)
		} else {
			c.auth.principal = p
			c.auth.state = saslDone
			c.auth.reauth = false
			// The session ends with the configured lifetime or the
			// credential's own expiry (an OAUTHBEARER token's exp),
			// whichever comes first; a token's expiry ends it even with no
			// lifetime configured, as in Kafka.
			c.auth.expires = time.Time{}
			if life := c.s.sec.lifetime; life > 0 {
				c.auth.expires = c.s.sec.now().Add(life)
			}
			if exp := c.auth.sess.Expiry(); !exp.IsZero() && (c.auth.expires.IsZero() || exp.Before(c.auth.expires)) {
				c.auth.expires = exp
			}
			c.auth.sess = nil
			c.nc.SetDeadline(time.Time{})
			c.lm.authResult(c.auth.mech, true)
			c.logger().Debug("authenticated", "principal", p, "mechanism", c.auth.mech)
			return out, true, nil
		}
	}
	if err != nil {
		c.lm.authResult(c.auth.mech, false)
		c.logAuthFailure("authentication failed", "mechanism", c.auth.mech, "reason", err.Error())
		c.failDelay()
		return nil, false, err
	}
	return out, false, nil
}

// EffectiveFailedAuthDelay is the wait a configured FailedAuthDelay gives:
// 0 means the default (DefaultFailedAuthDelay), a negative value no wait
// (Kafka's connection.failed.authentication.delay.ms=0).
func EffectiveFailedAuthDelay(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultFailedAuthDelay
	case d < 0:
		return 0
	}
	return d
}

// failDelay waits the failed-authentication delay (cut short by shutdown
// or hang-up), so that a client retrying a wrong password cannot hammer the
// server. An in-memory connection (the web console's, ServeConn) is not
// made to wait: the console waits the delay itself once it has released its
// login slot, so that wrong passwords cannot hold the slots right ones need.
func (c *conn) failDelay() {
	if !c.external || c.s.sec.failDelay <= 0 {
		return
	}
	t := time.NewTimer(c.s.sec.failDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	}
}

// saslAuthenticate answers a SaslAuthenticate; close: end the connection
// after writing the response.
func (c *conn) saslAuthenticate(r *request) (resp kmsg.Response, close bool) {
	req := r.req.(*kmsg.SASLAuthenticateRequest)
	out := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	switch c.auth.state {
	case saslAuthenticate:
	case saslNone, saslDone:
		// No exchange to take part in (a listener without SASL, or a
		// connection already authenticated): Kafka answers it and keeps
		// the connection.
		out.ErrorCode = errIllegalSaslState
		out.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
		return out, false
	default:
		out.ErrorCode = errIllegalSaslState
		out.ErrorMessage = kmsg.StringPtr("SaslAuthenticate before a SaslHandshake")
		return out, true
	}
	token, done, err := c.saslStep(req.SASLAuthBytes)
	if err != nil {
		out.ErrorCode = errSaslAuthenticationFailed
		out.ErrorMessage = kmsg.StringPtr("Authentication failed during authentication due to invalid credentials with SASL mechanism " + c.auth.mech)
		return out, true
	}
	out.SASLAuthBytes = token
	if done {
		if req.GetVersion() >= 1 {
			c.auth.authV1 = true
		} else {
			c.lm.noReauth(c.auth.mech) // v0 carries no session lifetime
		}
		if !c.auth.expires.IsZero() {
			out.SessionLifetimeMillis = max(c.auth.expires.Sub(c.s.sec.now()).Milliseconds(), 1)
		}
	}
	return out, false
}

// saslRawExchange runs the exchange that follows a v0 SaslHandshake: each
// token travels as a 4-byte size and the bytes, with no Kafka header
// (clients from before SaslAuthenticate). false closes the connection.
func (c *conn) saslRawExchange() bool {
	for c.auth.state == saslRaw {
		var sizeBuf [4]byte
		if _, err := io.ReadFull(c.br, sizeBuf[:]); err != nil {
			return false
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 0 || size > maxSaslTokenBytes {
			c.logAuthFailure("closing connection: bad SASL token size", "size", size, "max", maxSaslTokenBytes)
			c.lm.authResult(c.auth.mech, false)
			c.s.metrics.protocolError("sasl_token_size")
			return false
		}
		// Grown as the bytes arrive: a client announcing a token of the
		// limit and sending nothing holds 4 KiB, not 512 KiB, until the
		// authentication timeout.
		token, err := readFrame(c.br, size, c.directFrameBytes())
		if err != nil {
			return false
		}
		out, done, err := c.saslStep(token)
		if err != nil {
			return false // Kafka closes: the v0 framing has no error field
		}
		if done {
			c.lm.noReauth(c.auth.mech) // raw tokens: no way to learn a session lifetime
		}
		c.wbuf = binary.BigEndian.AppendUint32(c.wbuf[:0], uint32(len(out)))
		c.wbuf = append(c.wbuf, out...)
		if _, err := c.nc.Write(c.wbuf); err != nil {
			return false
		}
	}
	return true
}

// remoteHost is the IP address of a connection's peer, without port.
func remoteHost(nc net.Conn) string {
	remote := nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

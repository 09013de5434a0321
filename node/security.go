package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/security/principal"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
)

// SecurityConfig configures a node's TLS, SASL and ACLs (see
// docs/security.md). The zero value is a node without any.
type SecurityConfig struct {
	// TLS is the certificate (and client CA) of SSL and SASL_SSL
	// listeners; nil when none is configured.
	TLS *tlsconfig.Server
	// PrincipalRules maps client certificate subjects to principals
	// (Kafka's ssl.principal.mapping.rules); nil: User:<CN>.
	PrincipalRules *principal.Rules
	// Mechanisms are the SASL mechanisms enabled on SASL listeners
	// (default SCRAM-SHA-256 and SCRAM-SHA-512).
	Mechanisms []string
	// OAuth configures OAUTHBEARER when it is enabled.
	OAuth sasl.OAuthConfig
	// SessionLifetime is KIP-368's session lifetime (0 = off).
	SessionLifetime time.Duration
	// FailedAuthDelay is the wait before answering a failed
	// authentication (0: the default, 100ms; negative: none).
	FailedAuthDelay time.Duration
	// AuthTimeout bounds a new connection's TLS handshake and SASL
	// exchange together, from its start (default 10s).
	AuthTimeout time.Duration
	// Authorizer enforces ACLs even when no listener authenticates
	// anyone; ACLs are enforced anyway once one does.
	Authorizer bool
	// SuperUsers bypass ACLs ("User:admin").
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows a request on a resource that has
	// no ACL at all, as Kafka's allow.everyone.if.no.acl.found.
	AllowEveryoneIfNoACLFound bool
	// BootstrapUser, if set, is created with BootstrapPassword (SCRAM-SHA-256
	// and -512) when it has no credential yet.
	BootstrapUser     string
	BootstrapPassword string
	// AllowUnauthenticated lets a listener that authenticates no one bind
	// a non-loopback address.
	AllowUnauthenticated bool
	// Now is the clock of session lifetimes and token expiry (tests).
	Now func() time.Time
}

// DefaultMechanisms are the SASL mechanisms enabled by default.
var DefaultMechanisms = []string{sasl.ScramSHA256, sasl.ScramSHA512}

// knownMechanisms are the SASL mechanisms a node can serve.
var knownMechanisms = []string{sasl.ScramSHA256, sasl.ScramSHA512, sasl.Plain, sasl.OAuthBearer}

// ParseListeners parses Kafka's listener list: comma-separated
// PROTOCOL://HOST:PORT, the listener's name being its protocol.
func ParseListeners(s string) ([]server.Listener, error) {
	var out []server.Listener
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		proto, addr, ok := strings.Cut(part, "://")
		if !ok {
			return nil, fmt.Errorf("listener %q: want PROTOCOL://HOST:PORT", part)
		}
		proto = strings.ToUpper(proto)
		switch proto {
		case server.ProtocolPlaintext, server.ProtocolSSL, server.ProtocolSASLPlaintext, server.ProtocolSASLSSL:
		default:
			return nil, fmt.Errorf("listener %q: protocol %s is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", part, proto)
		}
		if _, port, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("listener %q: %w", part, err)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("listener %q: bad port", part)
		}
		for _, l := range out {
			if l.Name == proto {
				return nil, fmt.Errorf("listeners: %s is given twice (one listener per protocol)", proto)
			}
		}
		out = append(out, server.Listener{Name: proto, Protocol: proto, Addr: addr})
	}
	if len(out) == 0 {
		return nil, errors.New("listeners: none given")
	}
	return out, nil
}

// authenticates reports whether listener l authenticates every client.
func (sc *SecurityConfig) authenticates(l server.Listener) bool {
	switch l.Protocol {
	case server.ProtocolSASLPlaintext, server.ProtocolSASLSSL:
		return true
	case server.ProtocolSSL:
		return sc.TLS != nil && sc.TLS.RequiresClientCert()
	}
	return false
}

// Warnings are the start-up warnings about settings that work as
// configured but weaken what they protect: both are allowed by Kafka too,
// and both are easy to fall into.
func (sec *SecurityConfig) Warnings(listeners []server.Listener) []string {
	var out []string
	plain := slices.Contains(sec.Mechanisms, "PLAIN")
	for _, l := range listeners {
		if plain && l.Protocol == server.ProtocolSASLPlaintext && !isLoopback(l.Addr) {
			out = append(out, fmt.Sprintf("PLAIN is enabled on the SASL_PLAINTEXT listener %s, reachable from other hosts: "+
				"clients send their passwords there in clear text; serve PLAIN on SASL_SSL only", l.Addr))
		}
	}
	certs := sec.TLS != nil && sec.TLS.Config().ClientAuth != tls.NoClientCert && sec.PrincipalRules == nil
	for _, l := range listeners {
		if !certs || l.Protocol != server.ProtocolSSL {
			continue
		}
		for _, u := range sec.SuperUsers {
			if name, ok := strings.CutPrefix(u, "User:"); ok && !strings.Contains(name, "=") {
				out = append(out, fmt.Sprintf("super user %s can be claimed by any client certificate from the trusted CAs "+
					"whose CN is %q (without --tls-principal-rules a certificate's principal is User:<CN>, and its other "+
					"subject fields are not checked); --tls-principal-rules DEFAULT makes it the whole subject DN, as Kafka", u, name))
			}
		}
		break
	}
	return out
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkListeners refuses listeners that would expose an unauthenticated
// endpoint beyond loopback, and fills in TLS configurations.
func (sc *SecurityConfig) checkListeners(ls []server.Listener) ([]server.Listener, error) {
	out := make([]server.Listener, len(ls))
	for i, l := range ls {
		if l.Name == "" {
			l.Name = l.Protocol
		}
		if l.IsTLS() {
			if sc.TLS == nil {
				return nil, fmt.Errorf("listener %s needs --tls-cert-file and --tls-key-file", l.Name)
			}
			l.TLS = sc.TLS.Config()
			if l.Protocol == server.ProtocolSASLSSL && l.TLS.ClientAuth != tls.NoClientCert {
				// Client certificates are for SSL listeners: on SASL_SSL
				// the client is its SASL identity, and Kafka ignores
				// ssl.client.auth there too (KIP-684).
				l.TLS = sc.TLS.WithoutClientAuth()
			}
		}
		if !sc.authenticates(l) && !isLoopback(l.Addr) && !sc.AllowUnauthenticated {
			return nil, fmt.Errorf("refusing to start: listener %s://%s authenticates no one on a non-loopback address "+
				"(use SASL_SSL, SASL_PLAINTEXT or SSL with --tls-client-auth required, bind 127.0.0.1, or pass --allow-unauthenticated)", l.Protocol, l.Addr)
		}
		out[i] = l
	}
	return out, nil
}

// authEnabled reports whether some listener authenticates clients.
func (sc *SecurityConfig) authEnabled(ls []server.Listener) bool {
	for _, l := range ls {
		if sc.authenticates(l) || (l.Protocol == server.ProtocolSSL && sc.TLS != nil && sc.TLS.Config().ClientCAs != nil) {
			return true
		}
	}
	return false
}

// openSecurity loads the node's credentials and ACLs from its store and
// builds the server's Security.
func (n *Node) openSecurity(ls []server.Listener) (*server.Security, error) {
	sc := n.cfg.Security
	if sc == nil {
		sc = &SecurityConfig{}
	}
	st, err := authstate.Open(context.Background(), authstate.Options{
		Store:      n.store,
		Authorizer: acl.Authorizer{SuperUsers: sc.SuperUsers, AllowEveryoneIfNoACLFound: sc.AllowEveryoneIfNoACLFound},
		Logger:     n.log,
		Shared:     n.cl != nil, // other nodes write the same records in etcd
		ErrorHint:  n.storeErrorHint(),
	})
	if err != nil {
		return nil, fmt.Errorf("loading credentials and ACLs: %w", err)
	}
	n.auth = st
	if sc.BootstrapUser != "" {
		if sc.BootstrapPassword == "" {
			return nil, errors.New("--bootstrap-user needs its password in COHORT_BOOTSTRAP_PASSWORD")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		created, err := st.EnsureUser(ctx, sc.BootstrapUser, sc.BootstrapPassword)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("creating the bootstrap user %s: %w", sc.BootstrapUser, err)
		}
		if created {
			n.log.Info("bootstrap user created", "user", sc.BootstrapUser)
		}
	}
	sec := &server.Security{
		SessionLifetime: sc.SessionLifetime,
		FailedAuthDelay: sc.FailedAuthDelay,
		AuthTimeout:     sc.AuthTimeout,
		Now:             sc.Now,
		Admin:           st,
	}
	if sc.PrincipalRules != nil {
		rules := sc.PrincipalRules
		sec.PrincipalOf = func(c *x509.Certificate) (string, error) { return principal.FromCertificate(c, rules) }
	}
	sasled := false
	for _, l := range ls {
		sasled = sasled || l.IsSASL()
	}
	if sasled {
		mechs := sc.Mechanisms
		if len(mechs) == 0 {
			mechs = DefaultMechanisms
		}
		sec.Mechanisms = map[string]sasl.Mechanism{}
		for _, name := range mechs {
			var m sasl.Mechanism
			switch name {
			case sasl.ScramSHA256, sasl.ScramSHA512:
				m, err = sasl.NewSCRAM(name, st)
			case sasl.Plain:
				m = sasl.NewPlain(st)
			case sasl.OAuthBearer:
				oc := sc.OAuth
				if oc.Now == nil {
					oc.Now = sc.Now
				}
				m, err = sasl.NewOAuthBearer(oc)
			default:
				err = fmt.Errorf("unknown SASL mechanism %q (cohort has SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER)", name)
			}
			if err != nil {
				return nil, err
			}
			if r, ok := m.(sasl.Reloader); ok {
				n.oauthKeys = r
			}
			sec.Mechanisms[name] = m
		}
	}
	if sc.Authorizer || sc.authEnabled(ls) {
		sec.Authorizer = st
	}
	return sec, nil
}

// topicAccess answers the group layer's TopicAccess from the node's ACLs: a
// consumer's SubscribedTopicRegex gives it only the topics its principal may
// DESCRIBE, as in Kafka.
type topicAccess struct{ st *authstate.State }

func (a topicAccess) Version() uint64 { return a.st.ACLVersion() }

func (a topicAccess) CanDescribe(principal, host, topic string) bool {
	return a.st.Authorize(principal, host, acl.OpDescribe, acl.ResourceTopic, topic)
}

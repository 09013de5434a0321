package node

import (
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/cohort-dev/cohort/security/sasl"
)

// ErrConsoleNoListener: no listener lets the web console in, since every
// one asks clients for a certificate and none authenticates with SASL.
var ErrConsoleNoListener = errors.New("every Kafka listener of this node requires a client certificate and none is SASL, so the console cannot tell who is using it: give the node a SASL listener (SASL_SSL) with SCRAM users for the people using the console")

// ConsoleListener is the listener whose rules the web console's in-memory
// connections follow (see ServeInternal): the first SASL listener when there
// is one (sasl true: the console must authenticate as the person using it),
// else the first listener that lets in a client without a certificate
// (its principal then is ANONYMOUS, as any client's there). A listener that
// requires a client certificate is never used: the in-memory connection has
// no TLS, so it would let in, as ANONYMOUS, someone that listener refuses.
// ErrConsoleNoListener when no listener qualifies.
func (n *Node) ConsoleListener() (name string, sasl bool, err error) {
	ls := n.srv.Listeners()
	for _, l := range ls {
		if l.IsSASL() && !l.RequiresClientCert() {
			return l.Name, true, nil
		}
	}
	for _, l := range ls {
		if !l.IsSASL() && !l.RequiresClientCert() {
			return l.Name, false, nil
		}
	}
	return "", false, ErrConsoleNoListener
}

// ServeInternal serves nc (one end of a net.Pipe) as a Kafka connection on
// the console listener, without TLS: the web console is a Kafka client of
// its own node, so the node's authentication and ACLs decide what it sees.
func (n *Node) ServeInternal(nc net.Conn) error {
	name, _, err := n.ConsoleListener()
	if err != nil {
		nc.Close()
		return err
	}
	return n.srv.ServeConn(nc, name)
}

// FailedAuthDelay is how long a failed console login waits before it is
// answered (--failed-auth-delay), as a failed Kafka login does.
func (n *Node) FailedAuthDelay() time.Duration { return n.srv.FailedAuthDelay() }

// SelfAddrs are the host:port addresses under which clients reach this
// node (bound and advertised, every listener): a console dialing one of
// them is served in memory instead.
func (n *Node) SelfAddrs() []string {
	var out []string
	for _, l := range n.srv.Listeners() {
		if a := n.srv.ListenerAddr(l.Name); a != nil {
			out = append(out, a.String())
		}
	}
	if ls, err := n.listeners(); err == nil {
		if b, err := n.advertisedBroker(ls); err == nil {
			out = append(out, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
			for _, e := range b.Endpoints {
				out = append(out, net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
			}
		}
	}
	return out
}

// ConsolePeerTLS is the TLS configuration the web console dials other nodes
// with (cluster mode), or nil when the console listener has no TLS: their
// endpoints on that listener then speak TLS too. Other nodes' certificates
// are verified against tlsconfig.Server.PeerRoots.
func (n *Node) ConsolePeerTLS() *tls.Config {
	name, _, err := n.ConsoleListener()
	if err != nil {
		return nil
	}
	for _, l := range n.srv.Listeners() {
		if l.Name != name || !l.IsTLS() {
			continue
		}
		if sec := n.cfg.Security; sec != nil && sec.TLS != nil {
			return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: sec.TLS.PeerRoots()}
		}
	}
	return nil
}

// ConsoleMechanisms are the SASL mechanisms the console listener's clients
// may authenticate with (the node's, as for every SASL listener); nil when
// that listener is not SASL or there is none.
func (n *Node) ConsoleMechanisms() []string {
	if _, isSASL, err := n.ConsoleListener(); err != nil || !isSASL {
		return nil
	}
	if sc := n.cfg.Security; sc != nil && len(sc.Mechanisms) > 0 {
		return slices.Clone(sc.Mechanisms)
	}
	return slices.Clone(DefaultMechanisms)
}

// ConsoleCredentials names the SCRAM mechanisms user holds a credential
// for, read in the process (nothing is sent to anyone): the console tries
// those first, so a right password is not first refused by a mechanism
// the user has no credential for.
func (n *Node) ConsoleCredentials(user string) []string {
	if n.auth == nil {
		return nil
	}
	var out []string
	for _, m := range []string{sasl.ScramSHA512, sasl.ScramSHA256} {
		if c, ok := n.auth.Lookup(user, m); ok && c.Mechanism == m {
			out = append(out, m)
		}
	}
	return out
}

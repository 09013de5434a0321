package node

import (
	"crypto/tls"
	"net"
	"strconv"
)

// ConsoleListener is the listener whose rules the web console's in-memory
// connections follow (see ServeInternal): the first SASL listener when there
// is one (sasl true: the console must authenticate as the person using it),
// else the first listener.
func (n *Node) ConsoleListener() (name string, sasl bool) {
	ls := n.srv.Listeners()
	for _, l := range ls {
		if l.IsSASL() {
			return l.Name, true
		}
	}
	if len(ls) == 0 {
		return "", false
	}
	return ls[0].Name, false
}

// ServeInternal serves nc (one end of a net.Pipe) as a Kafka connection on
// the console listener, without TLS: the web console is a Kafka client of
// its own node, so the node's authentication and ACLs decide what it sees.
func (n *Node) ServeInternal(nc net.Conn) error {
	name, _ := n.ConsoleListener()
	return n.srv.ServeConn(nc, name)
}

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
	name, _ := n.ConsoleListener()
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

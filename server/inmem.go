package server

import (
	"fmt"
	"net"
)

// ServeConn serves nc, a connection that came from no listener (the web
// console's in-memory connections), as if it had arrived on the listener
// called like: the same name (so Metadata advertises that listener's
// endpoints) and the same SASL requirement, but without TLS, since the bytes
// never leave the process. An SSL listener's conn is served as PLAINTEXT
// (its principal is then ANONYMOUS: there is no certificate). The server
// owns nc from then on.
func (s *Server) ServeConn(nc net.Conn, like string) error {
	var l *Listener
	for i := range s.lcfg {
		if s.lcfg[i].Name == like {
			l = &s.lcfg[i]
		}
	}
	if l == nil {
		nc.Close()
		return fmt.Errorf("server: no listener called %s", like)
	}
	in := &listener{Listener: *l}
	in.TLS = nil
	switch in.Protocol {
	case ProtocolSSL:
		in.Protocol = ProtocolPlaintext
	case ProtocolSASLSSL:
		in.Protocol = ProtocolSASLPlaintext
	}
	if ok, _ := s.startConn(nc, in, false); !ok {
		nc.Close()
		return ErrServerClosed
	}
	return nil
}

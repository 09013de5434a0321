// Package loopback tells whether an HTTP request reached this process on a
// loopback address: the node's HTTP listener and its console decide what to
// answer (no password, no Host check) by where a request arrived.
package loopback

import (
	"net"
	"net/http"
)

// Local reports whether r arrived on a loopback address of this host (the
// listener's side of the connection, not the client's).
func Local(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

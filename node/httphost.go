package node

import (
	"net"
	"net/http"
	"strings"

	"github.com/cohort-dev/cohort/internal/loopback"
)

// guardHTTP wraps the HTTP listener's handler with what every answer
// carries and every request must pass.
//
// Headers: nosniff, no referrer and no framing on every answer (the console
// sets its own stricter policy on top).
//
// Host names: on a loopback address the listener answers only requests
// naming the node by an IP address, localhost (or a name under .localhost)
// or one of hosts (--http-hosts). A web page can make a browser on this
// host send requests to 127.0.0.1 under the page's own name (DNS
// rebinding); the browser then lets the page read the answers, so without
// this check any web site a person on the host visits could read the
// console (which answers loopback requests without a password when the
// node authenticates no one) and /metrics. Such a request names the site,
// never an address or localhost, and is answered 421. A listener on another
// address is left alone: its console already asks for a password or
// refuses, and what reaches it is the network's to decide.
func guardHTTP(next http.Handler, hosts []string) http.Handler {
	allowed := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		allowed[hostName(h)] = true // a port given with a name is not compared
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if loopback.Local(r) && !hostAllowed(r.Host, allowed) {
			writeText(w, http.StatusMisdirectedRequest, "misdirected request: this loopback HTTP listener answers only requests to localhost or an IP address (a proxy on this host that passes another Host: name it in --http-hosts)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostName is the name of a Host header or --http-hosts entry: without a
// port, brackets or a trailing dot, in lower case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
}

// hostAllowed reports whether a request's Host names this node in a way no
// web site can: an IP address, localhost, a name under .localhost (which
// resolves to loopback only), or an allowed name.
func hostAllowed(host string, allowed map[string]bool) bool {
	host = hostName(host)
	if host == "" {
		return true // HTTP/1.0 without Host: no browser sends that
	}
	if net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return allowed[host]
}

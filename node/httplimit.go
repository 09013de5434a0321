package node

import (
	"fmt"
	"net"
	"net/http"
	"sync"
)

// limitRequests bounds the requests the HTTP listener's handlers run at
// once: at most total over all clients and at most perIP from one address.
// The connection bounds (limitListener) do not do that by themselves: an
// HTTP/1 connection carries one request at a time, but an HTTP/2 one
// carries many streams at once, so one address with its 32 connections could
// otherwise run thousands of /metrics scrapes or console pages together,
// and each of those walks the node's groups. What needs bounding is the
// handlers' work, whichever protocol brought the request, so the bound is
// here. A request beyond it is answered at once, 429 for an address over its
// share and 503 when the whole listener is busy, without running its
// handler. /healthz and /readyz are left out: they cost nothing, and a busy
// listener must not read as a dead node to the orchestrator probing it.
func limitRequests(next http.Handler, total, perIP int) http.Handler {
	return &requestLimiter{next: next, total: total, perIP: perIP, byIP: map[string]int{}}
}

type requestLimiter struct {
	next         http.Handler
	total, perIP int

	mu   sync.Mutex
	n    int            // requests in their handlers
	byIP map[string]int // of which from each address
}

func (l *requestLimiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
		l.next.ServeHTTP(w, r)
		return
	}
	ip := requestIP(r)
	l.mu.Lock()
	switch {
	case l.byIP[ip] >= l.perIP:
		l.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		writeText(w, http.StatusTooManyRequests, fmt.Sprintf("too many requests in progress from this address (at most %d at once): try again in a moment", l.perIP))
		return
	case l.n >= l.total:
		l.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		writeText(w, http.StatusServiceUnavailable, fmt.Sprintf("too many requests in progress (at most %d at once): try again in a moment", l.total))
		return
	}
	l.n++
	l.byIP[ip]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.n--
		if l.byIP[ip]--; l.byIP[ip] == 0 {
			delete(l.byIP, ip)
		}
		l.mu.Unlock()
	}()
	l.next.ServeHTTP(w, r)
}

// requestIP is the IP address of r's client (its whole remote address if it
// has no port), as remoteIP is a connection's.
func requestIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

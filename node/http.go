package node

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cohort-dev/cohort/coordinator"
)

// newHTTPMux builds the handlers of the HTTP listener (--http-listen):
// /metrics, /healthz, /readyz, then whatever Config.HTTPHandlers adds (the
// web console).
func (n *Node) newHTTPMux(reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	if reg != nil {
		var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		if n.cfg.MetricsAuth {
			h = n.requireMetricsAuth(h)
		}
		mux.Handle("GET /metrics", h)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.Handle("GET /readyz", readyHandler(n.Ready))
	if n.cfg.HTTPHandlers != nil {
		n.cfg.HTTPHandlers(mux, n)
	}
	return mux
}

// startHTTP listens on addr and serves the node's HTTP handlers.
func (n *Node) startHTTP(addr string, reg *prometheus.Registry) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	n.mux = n.newHTTPMux(reg)
	ln = limitListener(ln, maxHTTPConns, maxHTTPConnsPerIP)
	// Every connection ends within bounded time whatever the client does:
	// headers within 5 s, the whole request within 30 s, the answer
	// written within 60 s (a console page waits at most 10 s for the
	// node), and an idle keep-alive connection (HTTP/1 or HTTP/2) closes
	// after 2 minutes. Without them a client that sent one request and
	// stayed, or announced a body and stalled, held its descriptor for
	// ever, and enough of them exhausted the process's descriptors, so that
	// the Kafka listeners could no longer accept anyone.
	//
	// Over HTTPS clients may speak HTTP/2, whose connections carry many
	// requests at once: limitRequests bounds the requests in the handlers
	// as the connection bounds do for HTTP/1, and a connection's streams
	// are held to 100 (the least RFC 9113 recommends; Go's default is 250),
	// so that the goroutines of the streams refused there stay few too.
	n.http = &http.Server{Handler: limitRequests(guardHTTP(n.mux, n.cfg.HTTPHosts), maxHTTPConns, maxHTTPConnsPerIP),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: maxHTTP2Streams},
		// The stdlib logs every failed TLS handshake (scanners, plain HTTP
		// sent to the HTTPS port): at debug level here, not on stderr.
		ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)}
	n.httpAddr = ln.Addr()
	scheme := "http"
	if n.cfg.HTTPTLS {
		scheme = "https"
	}
	n.log.Info("serving HTTP (metrics, health, console)", "scheme", scheme, "addr", n.httpAddr.String())
	if n.cfg.HTTPTLS {
		n.http.TLSConfig = n.cfg.Security.TLS.WithoutClientAuth()
		if n.cfg.MetricsAuth {
			// A scraper may present a client certificate instead of a
			// password (requireMetricsAuth).
			n.http.TLSConfig = n.cfg.Security.TLS.ClientCertIfGiven()
		}
		go n.http.ServeTLS(ln, "", "")
		return nil
	}
	go n.http.Serve(ln)
	return nil
}

// HTTPMux returns the HTTP listener's mux (nil without --http-listen), to
// which more handlers can be added while the node runs.
func (n *Node) HTTPMux() *http.ServeMux { return n.mux }

// HTTPAddr is the address of the HTTP listener (/metrics, /healthz,
// /readyz), or "" without one.
func (n *Node) HTTPAddr() string {
	if n.httpAddr == nil {
		return ""
	}
	return n.httpAddr.String()
}

// MetricsAddr is HTTPAddr (its older name).
func (n *Node) MetricsAddr() string { return n.HTTPAddr() }

// Ready reports whether the node serves every coordinator partition it
// owns, and if not, why not in a few words: in cluster mode it must hold
// its etcd lease, be listed in its own view of the registry, hold every
// partition the assignment gives it under the live nodes it sees (not
// waiting for another node to hand one over) and have loaded them all;
// alone, it must have loaded every partition.
func (n *Node) Ready() (bool, string) {
	states := n.coord.PartitionStates(nil)
	owned := func(p int32) bool { return true }
	var awaitedList []string
	if n.cl != nil {
		if !n.cl.c.Serving() {
			return false, "no valid etcd lease"
		}
		mine := map[int32]bool{}
		for _, p := range n.cl.c.OwnedPartitions() {
			mine[p] = true
		}
		owned = func(p int32) bool { return mine[p] }
		awaited, listed := n.cl.c.Awaited()
		if !listed {
			return false, "not in the cluster's registry yet"
		}
		for _, p := range awaited {
			awaitedList = append(awaitedList, fmt.Sprint(p))
		}
	}
	var loading, down []string
	total := 0
	for i, st := range states {
		p := int32(i)
		if !owned(p) {
			continue
		}
		total++
		switch st {
		case coordinator.PartitionLoading:
			loading = append(loading, fmt.Sprint(p))
		case coordinator.PartitionUnowned:
			down = append(down, fmt.Sprint(p))
		}
	}
	var why []string
	if len(loading) > 0 {
		why = append(why, fmt.Sprintf("loading %d of %d coordinator partitions (%s)", len(loading), total, short(loading)))
	}
	if len(down) > 0 {
		why = append(why, fmt.Sprintf("%d coordinator partitions not served (%s)", len(down), short(down)))
	}
	if len(awaitedList) > 0 {
		why = append(why, fmt.Sprintf("%d coordinator partitions not yet handed over by other nodes (%s)", len(awaitedList), short(awaitedList)))
	}
	if len(why) > 0 {
		return false, strings.Join(why, "; ")
	}
	return true, "ok"
}

// short lists at most 5 items.
func short(items []string) string {
	if len(items) > 5 {
		return strings.Join(items[:5], ",") + ",…"
	}
	return strings.Join(items, ",")
}

// readyHandler answers 200 "ok" when ready says so, 503 with its reason
// otherwise.
func readyHandler(ready func() (bool, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ok, why := ready()
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		writeText(w, code, why)
	})
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, body)
}

// maxHTTPConns bounds the HTTP listener's open connections: a Prometheus
// server, probes and a few console users need a handful. At the bound the
// listener accepts no more until one closes (they wait in the kernel's
// backlog), so a flood of connections to the HTTP port cannot take the file
// descriptors the Kafka listeners need. maxHTTPConnsPerIP bounds those of
// one address, so that one client holding connections open (half-sent
// requests, each for up to the header timeout) cannot take every slot and
// starve the health probes of /healthz: beyond it a new connection from
// that address is closed at once.
const (
	maxHTTPConns      = 256
	maxHTTPConnsPerIP = 32
	maxHTTP2Streams   = 100
)

// limitListener accepts at most n connections at once, and at most perIP
// from one IP address.
func limitListener(ln net.Listener, n, perIP int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{}),
		perIP: perIP, byIP: map[string]int{}}
}

type limitedListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{} // closed by Close: Accept waits no more
	once  sync.Once

	perIP int
	mu    sync.Mutex
	byIP  map[string]int // open connections by remote IP
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		full := l.byIP[ip] >= l.perIP
		if !full {
			l.byIP[ip]++
		}
		l.mu.Unlock()
		if full {
			c.Close()
			<-l.slots
			continue
		}
		return &limitedConn{Conn: c, release: func() {
			l.mu.Lock()
			if l.byIP[ip]--; l.byIP[ip] == 0 {
				delete(l.byIP, ip)
			}
			l.mu.Unlock()
			<-l.slots
		}}, nil
	}
}

// remoteIP is the IP address of c's peer (its whole address if it has none).
func remoteIP(c net.Conn) string {
	a := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}

func (l *limitedListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/logburst"
)

// DefaultMaxFrameBytes is the default largest request accepted, Kafka's
// socket.request.max.bytes default (100 MiB).
const DefaultMaxFrameBytes = 100 << 20

// Config configures a Server.
type Config struct {
	// Listeners are the addresses the server accepts connections on, each
	// with its security protocol. Empty means one listener: PLAINTEXT on
	// Listen (or SSL when TLS is set).
	Listeners []Listener
	// Listen is the TCP address of the single listener used when
	// Listeners is empty, e.g. ":9092" or "127.0.0.1:0".
	Listen string
	// Groups serves the group-scoped APIs. Required.
	Groups Groups
	// Topology names the nodes and group coordinators. Required.
	Topology Topology
	// Catalog holds the topics served by Metadata and changed by
	// CreateTopics, DeleteTopics and CreatePartitions. Nil means an empty
	// catalog of the server's own.
	Catalog *catalog.Catalog
	// Group is the coordinator's group configuration: the node's values
	// that a group's own configs replace (DescribeConfigs shows them,
	// IncrementalAlterConfigs checks against them). Zero means Kafka's
	// defaults.
	Group group.Config
	// MaxFrameBytes is the largest request frame accepted (excluding the
	// 4-byte size); larger frames close the connection. 0 means
	// DefaultMaxFrameBytes.
	MaxFrameBytes int32
	// MaxInflightRequestBytes bounds the frames of large requests (over
	// 64 KiB) decoded and answered at once, summed over all connections
	// (reqbudget.go); a large request beyond it waits, one larger than it
	// is served alone. 0 means DefaultMaxInflightRequestBytes, negative no
	// limit.
	MaxInflightRequestBytes int64
	// MaxRequestPartitions bounds the partitions one request may name over
	// its topics and groups (entrylimit.go); a request naming more closes
	// the connection. 0 means DefaultMaxRequestPartitions, negative no
	// limit.
	MaxRequestPartitions int64
	// Logger receives the server's logs. Nil means slog.Default().
	Logger *slog.Logger
	// TLS, with Listen, makes the single listener an SSL listener.
	TLS *tls.Config
	// Registerer, if set, receives the server's Prometheus metrics.
	Registerer prometheus.Registerer
	// Security configures authentication and authorization (nil: none).
	Security *Security
	// Tap, if set, is called with every request the server answered and
	// its answer, just before the answer is written to the client (SASL
	// exchanges excluded): the client cannot act on an answer the tap has
	// not seen. It runs on the connection's goroutine and must
	// not keep or change req and resp. It exists for audit and tests: the
	// client test bed records every generation's assignments through it.
	Tap func(c Client, req kmsg.Request, resp kmsg.Response)
	// MaxConnections caps the client connections open at once over all
	// listeners (0: no cap), as Kafka's max.connections does. A connection
	// beyond it is closed as soon as it is accepted (Kafka waits to accept
	// it instead); clients reconnect with their backoff.
	MaxConnections int
	// MaxConnectionsPerIP caps the connections open at once from one IP
	// address (0: no cap): Kafka's max.connections.per.ip, and as in Kafka a
	// connection beyond it is closed at once.
	MaxConnectionsPerIP int
	// ConnectionsMaxIdle closes a client connection that has not sent a
	// complete request for this long (0: never), as Kafka's
	// connections.max.idle.ms (10 minutes there): an idle client costs a
	// socket and buffers, and a client that stops in the middle of a frame
	// holds what it sent. A connection whose request is being answered (a
	// parked JoinGroup) is never idle. Checked every tenth of the period.
	ConnectionsMaxIdle time.Duration
	// Now is the clock of the idle check (nil: time.Now).
	Now func() time.Time

	// hangupWatchDelay replaces the package's constant (0: the constant);
	// tests set it to watch at once.
	hangupWatchDelay time.Duration
}

// Listener is one address the server accepts connections on.
type Listener struct {
	// Name is the listener's name, by which Metadata and FindCoordinator
	// pick each broker's advertised endpoint (Broker.Endpoints). Default:
	// Protocol.
	Name string
	// Protocol is the security protocol: ProtocolPlaintext, ProtocolSSL,
	// ProtocolSASLPlaintext or ProtocolSASLSSL.
	Protocol string
	// Addr is the TCP address to bind.
	Addr string
	// TLS is the server TLS configuration of SSL and SASL_SSL listeners
	// (its ClientAuth decides mTLS).
	TLS *tls.Config
}

// IsTLS reports whether the listener's protocol runs over TLS.
func (l Listener) IsTLS() bool { return l.Protocol == ProtocolSSL || l.Protocol == ProtocolSASLSSL }

// IsSASL reports whether the listener's protocol authenticates with SASL.
func (l Listener) IsSASL() bool {
	return l.Protocol == ProtocolSASLPlaintext || l.Protocol == ProtocolSASLSSL
}

// FailedAuthDelay is how long the server waits before answering a failed
// authentication (Security.FailedAuthDelay or its default). Connections
// from ServeConn are answered at once: their caller waits it (the console).
func (s *Server) FailedAuthDelay() time.Duration { return s.sec.failDelay }

// RequiresClientCert reports whether the listener refuses a TLS client that
// presents no certificate (--tls-client-auth required).
func (l Listener) RequiresClientCert() bool {
	return l.IsTLS() && l.TLS != nil && (l.TLS.ClientAuth == tls.RequireAndVerifyClientCert || l.TLS.ClientAuth == tls.RequireAnyClientCert)
}

// listener is a bound Listener.
type listener struct {
	Listener
	ln net.Listener
}

// Server is a Kafka protocol front end. Create it with New.
type Server struct {
	cfg     Config
	log     *slog.Logger
	catalog *catalog.Catalog
	metrics *metrics   // nil when no Registerer
	authz   Authorizer // nil: every request allowed
	sec     securityRuntime

	lcfg      []Listener
	mu        sync.Mutex
	lns       []*listener // bound, in lcfg order
	conns     map[*conn]struct{}
	counted   int                // connections from listeners, while a limit is set
	perIP     map[netip.Addr]int // … by remote address
	refusals  refusalLog
	badLog    burstLog // "closing connection: bad request" lines
	authLog   burstLog // failed and refused authentications
	cutLog    burstLog // "strings too long for the protocol cut" lines
	prodLog   burstLog // "refusing Produce" lines
	acceptLog burstLog // "accept failed; retrying" lines
	expiryLog burstLog // "SASL session expired" lines (on the session clock)
	// idleClock is the time (Unix ns) of the last idle sweep: connections
	// stamp their idle start with it, an atomic load per request instead
	// of a clock read.
	idleClock atomic.Int64
	budget    *requestBudget // nil: no limit
	closed    bool
	serving   bool
	baseCtx   context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // connection goroutines
}

// ErrServerClosed is returned by Listen and Serve after Close.
var ErrServerClosed = errors.New("server: closed")

// New checks cfg and returns a server that is not yet listening.
func New(cfg Config) (*Server, error) {
	if cfg.Groups == nil {
		return nil, errors.New("server: Config.Groups is required")
	}
	if cfg.Topology == nil {
		return nil, errors.New("server: Config.Topology is required")
	}
	if cfg.MaxFrameBytes < 0 {
		return nil, fmt.Errorf("server: Config.MaxFrameBytes is negative (%d)", cfg.MaxFrameBytes)
	}
	if cfg.MaxFrameBytes == 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.MaxInflightRequestBytes == 0 {
		cfg.MaxInflightRequestBytes = DefaultMaxInflightRequestBytes
	}
	if cfg.MaxRequestPartitions == 0 {
		cfg.MaxRequestPartitions = DefaultMaxRequestPartitions
	}
	if cfg.hangupWatchDelay == 0 {
		cfg.hangupWatchDelay = hangupWatchDelay
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ConnectionsMaxIdle < 0 {
		return nil, fmt.Errorf("server: Config.ConnectionsMaxIdle is negative (%v)", cfg.ConnectionsMaxIdle)
	}
	lcfg, err := listenerConfigs(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{
		lcfg:    lcfg,
		cfg:     cfg,
		log:     cfg.Logger,
		catalog: cfg.Catalog,
		conns:   make(map[*conn]struct{}),
		perIP:   make(map[netip.Addr]int),
		budget:  newRequestBudget(cfg.MaxInflightRequestBytes),
	}
	if s.catalog == nil {
		s.catalog = catalog.New(catalog.Options{})
	}
	if cfg.Security != nil {
		s.authz = cfg.Security.Authorizer
	}
	s.sec = newSecurityRuntime(cfg.Security)
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	if cfg.Registerer != nil {
		m, err := newMetrics(cfg.Registerer, lcfg, s.sec.mechNames)
		if err != nil {
			return nil, err
		}
		s.metrics = m
	}
	return s, nil
}

// Catalog returns the catalog the server serves.
func (s *Server) Catalog() *catalog.Catalog { return s.catalog }

// Listen binds every listener. Call it before Serve when the addresses
// must be known first (Addr, ListenerAddr), e.g. to advertise a port picked
// by the kernel through SingleNodeTopology.SetSelf.
func (s *Server) Listen() error {
	var bound []*listener
	for _, l := range s.lcfg {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			for _, b := range bound {
				b.ln.Close()
			}
			return fmt.Errorf("server: listen %s://%s: %w", l.Protocol, l.Addr, err)
		}
		bound = append(bound, &listener{Listener: l, ln: ln})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.lns != nil {
		for _, b := range bound {
			b.ln.Close()
		}
		if s.closed {
			return ErrServerClosed
		}
		return errors.New("server: already listening")
	}
	s.lns = bound
	return nil
}

// Addr returns the bound address of the first listener, or nil before
// Listen (or Serve on a listener).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) == 0 {
		return nil
	}
	return s.lns[0].ln.Addr()
}

// ListenerAddr returns the bound address of the listener called name, or
// nil.
func (s *Server) ListenerAddr(name string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lns {
		if l.Name == name {
			return l.ln.Addr()
		}
	}
	return nil
}

// Listeners returns the configured listeners (names filled in).
func (s *Server) Listeners() []Listener { return append([]Listener(nil), s.lcfg...) }

// ListenAndServe is Listen followed by Serve.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	return s.Serve(ctx)
}

// Serve accepts connections on the listeners bound by Listen (binding them
// first if needed) until ctx is done or Close is called; either way it
// shuts the server down gracefully (see Close) and returns nil. It returns
// an error if a listener fails.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	bound := s.lns != nil
	s.mu.Unlock()
	if !bound {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	return s.serve(ctx)
}

// ServeListener is Serve on a listener the caller created (tests use
// 127.0.0.1:0), used as the first configured listener. The server owns ln
// from then on and closes it.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	if s.lns != nil {
		s.mu.Unlock()
		return errors.New("server: already listening")
	}
	s.lns = []*listener{{Listener: s.lcfg[0], ln: ln}}
	s.mu.Unlock()
	return s.serve(ctx)
}

func (s *Server) serve(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	if s.serving {
		s.mu.Unlock()
		return errors.New("server: already serving")
	}
	s.serving = true
	lns := s.lns
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	if s.cfg.ConnectionsMaxIdle > 0 {
		s.idleClock.Store(s.cfg.Now().UnixNano())
		go s.sweepIdleLoop()
	}

	errs := make(chan error, len(lns))
	for _, l := range lns {
		go func() { errs <- s.accept(l) }()
	}
	var first error
	for range lns {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	s.wg.Wait() // Close or Shutdown is finishing the connections
	return first
}

// accept runs one listener's accept loop until the server closes (nil) or
// the listener fails (the server stops; the error).
func (s *Server) accept(l *listener) error {
	s.log.Info("serving Kafka protocol", "listener", l.Name, "protocol", l.Protocol, "addr", l.ln.Addr().String())
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				// Bounded: out of file descriptors, the backoff falls back
				// to its least after each connection accepted, and a
				// client closing and opening connections at the limit
				// would otherwise make a line every few milliseconds.
				s.acceptLog.log(s.log, slog.LevelWarn, "accept failed; retrying", "listener", l.Name, "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			s.log.Error("accept failed; server stops", "listener", l.Name, "err", err)
			s.Close()
			return fmt.Errorf("server: accept on %s: %w", l.Name, err)
		}
		backoff = 0
		ok, refused := s.startConn(nc, l, true)
		if !ok {
			nc.Close()
			return nil
		}
		if refused != "" {
			// Counted before the close, so that whoever sees the
			// connection closed also sees it counted.
			s.metrics.listener(l.Name).connRefused(refused)
			nc.Close()
			s.refusals.note(s.log, l.Name, refused, nc.RemoteAddr())
		}
	}
}

// isTemporary reports whether an accept error comes and goes (out of file
// descriptors, a connection reset before it was accepted, a timeout), so the
// accept loop should retry rather than stop.
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	if errors.As(err, &t) && t.Temporary() {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// startConn registers and starts a connection; false if the server closed.
// A connection from a listener that would pass MaxConnections or
// MaxConnectionsPerIP is not started: refused says which limit, and the
// caller closes it. Without limits nothing is counted.
func (s *Server) startConn(nc net.Conn, l *listener, fromListener bool) (ok bool, refused string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, ""
	}
	var ip netip.Addr
	counted := fromListener && (s.cfg.MaxConnections > 0 || s.cfg.MaxConnectionsPerIP > 0)
	if counted {
		ip = remoteIP(nc)
		switch {
		case s.cfg.MaxConnections > 0 && s.counted >= s.cfg.MaxConnections:
			return true, refusedMaxConnections
		case s.cfg.MaxConnectionsPerIP > 0 && s.perIP[ip] >= s.cfg.MaxConnectionsPerIP:
			return true, refusedMaxConnectionsPerIP
		}
		s.counted++
		s.perIP[ip]++
	}
	c := newConn(s, nc, l)
	c.counted, c.ip, c.external = counted, ip, fromListener
	c.idleSince.Store(s.idleClock.Load())
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	go c.run()
	return true, ""
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.counted {
		c.counted = false
		s.counted--
		if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
			delete(s.perIP, c.ip)
		}
	}
	s.mu.Unlock()
}

// The limits a connection can be refused by (the reason label of
// cohort_server_connections_refused_total).
const (
	refusedMaxConnections      = "max_connections"
	refusedMaxConnectionsPerIP = "max_connections_per_ip"
)

// remoteIP is nc's remote IP address (IPv4 in IPv4 form), or the zero
// address for a connection that is not TCP.
func remoteIP(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// refusalLog logs refused connections at most once every refusalLogEvery,
// with how many were refused since the last line: a client reconnecting in a
// loop must not flood the log.
type refusalLog struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

const refusalLogEvery = 10 * time.Second

// burstLog lets at most burstLogMax lines through per burstLogWindow and
// counts the rest, so that a flood of bad requests (hundreds of
// connections each sending garbage) logs a few lines, not one per
// connection; the metric counts every one.
type burstLog struct{ logburst.Limiter }

const (
	burstLogMax    = logburst.Max
	burstLogWindow = logburst.Window
)

// info logs msg at info level if the limiter lets it through now, adding
// how many lines were left out before it.
func (b *burstLog) info(log *slog.Logger, msg string, attrs ...any) {
	b.log(log, slog.LevelInfo, msg, attrs...)
}

// log is info at level.
func (b *burstLog) log(log *slog.Logger, level slog.Level, msg string, attrs ...any) {
	b.Log(log, level, time.Now(), msg, attrs...)
}

func (r *refusalLog) note(log *slog.Logger, listener, reason string, peer net.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < refusalLogEvery {
		r.skipped++
		return
	}
	log.Warn("connection refused: too many connections", "listener", listener, "reason", reason,
		"remote", peer.String(), "refused_unlogged_before", r.skipped)
	r.last, r.skipped = now, 0
}

// Close shuts the server down: it stops accepting, cancels the contexts of
// requests in flight (parked JoinGroups return), closes every connection and
// waits for their goroutines to finish. Responses not yet written are
// dropped; use Shutdown to let them out first. It is safe to call more than
// once and concurrently with Serve and Shutdown.
func (s *Server) Close() error {
	conns, err := s.stop()
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
	return err
}

// Shutdown shuts the server down like Close, but lets each connection write
// the response of the request it is handling when the request's context is
// cancelled (a coordinator can answer a parked JoinGroup NOT_COORDINATOR
// rather than leaving the client to notice a hang-up). Requests queued
// behind it are not handled. When ctx ends first, the remaining connections
// are closed as by Close and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	conns, err := s.stop()
	for _, c := range conns {
		c.drain()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// stop marks the server closed, closes the listener, cancels every
// request context and returns the open connections.
func (s *Server) stop() ([]*conn, error) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	if s.closed {
		s.mu.Unlock()
		return conns, nil
	}
	s.closed = true
	lns := s.lns
	s.mu.Unlock()

	var err error
	for _, l := range lns {
		if cerr := l.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
			err = cerr
		}
	}
	s.cancel()
	return conns, err
}

// listenerConfigs checks the configured listeners (or builds the single
// one from Listen and TLS) and fills in their names.
func listenerConfigs(cfg Config) ([]Listener, error) {
	ls := cfg.Listeners
	if len(ls) == 0 {
		l := Listener{Protocol: ProtocolPlaintext, Addr: cfg.Listen, TLS: cfg.TLS}
		if cfg.TLS != nil {
			l.Protocol = ProtocolSSL
		}
		ls = []Listener{l}
	} else if cfg.Listen != "" || cfg.TLS != nil {
		return nil, errors.New("server: set either Listeners or Listen/TLS, not both")
	}
	out := make([]Listener, len(ls))
	names := map[string]bool{}
	for i, l := range ls {
		if l.Name == "" {
			l.Name = l.Protocol
		}
		switch l.Protocol {
		case ProtocolPlaintext, ProtocolSASLPlaintext:
			if l.TLS != nil {
				return nil, fmt.Errorf("server: listener %s: %s takes no TLS configuration", l.Name, l.Protocol)
			}
		case ProtocolSSL, ProtocolSASLSSL:
			if l.TLS == nil {
				return nil, fmt.Errorf("server: listener %s: %s needs a TLS configuration", l.Name, l.Protocol)
			}
		default:
			return nil, fmt.Errorf("server: listener %s: unknown security protocol %q", l.Name, l.Protocol)
		}
		if l.IsSASL() && (cfg.Security == nil || len(cfg.Security.Mechanisms) == 0) {
			return nil, fmt.Errorf("server: listener %s: %s needs at least one SASL mechanism", l.Name, l.Protocol)
		}
		if names[l.Name] {
			return nil, fmt.Errorf("server: two listeners are called %s", l.Name)
		}
		names[l.Name] = true
		out[i] = l
	}
	return out, nil
}

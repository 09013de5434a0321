package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/catalog"
)

// DefaultMaxFrameBytes is the default largest request accepted, Kafka's
// socket.request.max.bytes default (100 MiB).
const DefaultMaxFrameBytes = 100 << 20

// Config configures a Server.
type Config struct {
	// Listen is the TCP address Listen binds, e.g. ":9092" or
	// "127.0.0.1:0".
	Listen string
	// Groups serves the group-scoped APIs. Required.
	Groups Groups
	// Topology names the nodes and group coordinators. Required.
	Topology Topology
	// Catalog holds the topics served by Metadata and changed by
	// CreateTopics, DeleteTopics and CreatePartitions. Nil means an empty
	// catalog of the server's own.
	Catalog *catalog.Catalog
	// MaxFrameBytes is the largest request frame accepted (excluding the
	// 4-byte size); larger frames close the connection. 0 means
	// DefaultMaxFrameBytes.
	MaxFrameBytes int32
	// Logger receives the server's logs. Nil means slog.Default().
	Logger *slog.Logger
	// TLS, if set, makes every accepted connection a TLS server connection.
	TLS *tls.Config
	// Registerer, if set, receives the server's Prometheus metrics.
	Registerer prometheus.Registerer
	// Security configures authentication and authorization (nil: none).
	Security *Security
}

// Server is a Kafka protocol front end. Create it with New.
type Server struct {
	cfg     Config
	log     *slog.Logger
	catalog *catalog.Catalog
	metrics *metrics // nil when no Registerer
	authz   Authorizer // nil: every request allowed

	mu      sync.Mutex
	ln      net.Listener
	conns   map[*conn]struct{}
	closed  bool
	serving bool
	baseCtx context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // connection goroutines
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		catalog: cfg.Catalog,
		conns:   make(map[*conn]struct{}),
	}
	if s.catalog == nil {
		s.catalog = catalog.New(catalog.Options{})
	}
	if cfg.Security != nil {
		s.authz = cfg.Security.Authorizer
	}
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	if cfg.Registerer != nil {
		m, err := newMetrics(cfg.Registerer)
		if err != nil {
			return nil, err
		}
		s.metrics = m
	}
	return s, nil
}

// Catalog returns the catalog the server serves.
func (s *Server) Catalog() *catalog.Catalog { return s.catalog }

// Listen binds Config.Listen. Call it before Serve when the address must be
// known first (Addr), e.g. to advertise a port picked by the kernel through
// SingleNodeTopology.SetSelf.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("server: listen: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		ln.Close()
		return ErrServerClosed
	}
	if s.ln != nil {
		ln.Close()
		return errors.New("server: already listening")
	}
	s.ln = ln
	return nil
}

// Addr returns the bound address, or nil before Listen (or Serve on a
// listener).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// ListenAndServe is Listen followed by Serve.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	return s.Serve(ctx)
}

// Serve accepts connections on the listener bound by Listen (binding it
// first if needed) until ctx is done or Close is called; either way it shuts
// the server down gracefully (see Close) and returns nil. It returns an error
// if the listener fails.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	return s.serve(ctx)
}

// ServeListener is Serve on a listener the caller created (tests use
// 127.0.0.1:0). The server owns ln from then on and closes it.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	if s.ln != nil {
		s.mu.Unlock()
		return errors.New("server: already listening")
	}
	s.ln = ln
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
	ln := s.ln
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()

	s.log.Info("serving Kafka protocol", "addr", ln.Addr().String(), "tls", s.cfg.TLS != nil)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				s.wg.Wait() // Close or Shutdown is finishing the connections
				return nil
			}
			if isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			s.log.Error("accept failed; server stops", "err", err)
			s.Close()
			return fmt.Errorf("server: accept: %w", err)
		}
		backoff = 0
		if s.cfg.TLS != nil {
			nc = tls.Server(nc, s.cfg.TLS)
		}
		if !s.startConn(nc) {
			nc.Close()
			return nil
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
func (s *Server) startConn(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	go c.run()
	return true
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
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
	ln := s.ln
	s.mu.Unlock()

	var err error
	if ln != nil {
		if err = ln.Close(); errors.Is(err, net.ErrClosed) {
			err = nil
		}
	}
	s.cancel()
	return conns, err
}

package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// flakyListener fails every other Accept with a temporary error (what
// running out of file descriptors gives) and otherwise hands out one end of
// a pipe, closing the other, as a client at the descriptor limit closing
// and opening connections would: the accept loop's backoff falls back to
// its least after each connection.
type flakyListener struct {
	mu     sync.Mutex
	n, max int
	fail   bool
	closed chan struct{}
	once   sync.Once
}

type tempErr struct{}

func (tempErr) Error() string   { return "accept: too many open files" }
func (tempErr) Temporary() bool { return true }
func (tempErr) Timeout() bool   { return false }

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.n >= l.max {
		l.mu.Unlock()
		<-l.closed
		return nil, net.ErrClosed
	}
	l.n++
	l.fail = !l.fail
	fail := l.fail
	l.mu.Unlock()
	if fail {
		return nil, tempErr{}
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

func (l *flakyListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *flakyListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *flakyListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// TestAcceptFailureLogBounded: "accept failed; retrying" goes through a
// burst limit like the other lines a client can repeat. Out of file
// descriptors, each connection accepted resets the backoff, so a client
// closing and opening connections at the limit made a WARN line every few
// milliseconds.
func TestAcceptFailureLogBounded(t *testing.T) {
	const failures = 100
	buf := &testlog.Buffer{}
	srv, err := New(Config{Groups: newFakeGroups(), Topology: SingleNode(Broker{}, "c"),
		Logger: slog.New(slog.NewTextHandler(buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln := &flakyListener{max: 2 * failures, closed: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- srv.ServeListener(context.Background(), ln) }()
	testwait.Until(30*time.Second, func() bool { return ln.accepted() >= 2*failures })
	srv.Close()
	if err := <-done; err != nil && !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if n := ln.accepted(); n < 2*failures {
		t.Fatalf("the accept loop called Accept %d times in 30s, want %d", n, 2*failures)
	}
	// 100 failures take at least 0.5 s of backoff, far less than a window:
	// one window's lines (two, should the run straddle a window).
	if n := strings.Count(buf.String(), "accept failed; retrying"); n < 1 || n > 2*burstLogMax {
		t.Fatalf("%d accept-failure lines for %d failures, want 1 to %d", n, failures, 2*burstLogMax)
	}
}

// Package testready waits, in a test, until a `cohort serve` child process
// says that it is ready, rather than until a TCP connection to its port
// opens: a connection opens as soon as anything listens there (another
// process, or the child while it has bound its port and not yet finished
// starting, or a moment before it fails and exits), and says nothing of
// whether cohort's store is open and its listeners served.
//
// The test gives the child a notification socket in NOTIFY_SOCKET, the
// variable of systemd's Type=notify protocol that cohort serve speaks: it
// sends READY=1 once it serves (docs/operations.md, "Start-up"). Only the
// child knows the socket, so what arrives there is the child's word. The
// waits fail at once when the child exits first.
package testready

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Env is the variable through which the child learns the socket.
const Env = "NOTIFY_SOCKET"

// ErrExited: the child exited before it said it was ready.
var ErrExited = errors.New("the process exited before it reported ready")

// Socket is a notification socket for one run of a child process.
type Socket struct {
	dir  string
	conn *net.UnixConn

	ready chan struct{} // closed at the first READY=1
	once  sync.Once

	mu     sync.Mutex
	status string // the last STATUS= received
}

// Listen opens a notification socket in a new temporary directory (a short
// path: a unix socket's path is limited to about 100 bytes). Close removes
// it.
func Listen() (*Socket, error) {
	dir, err := os.MkdirTemp("", "cohort-ready")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Socket{dir: dir, conn: conn, ready: make(chan struct{})}
	go s.read()
	return s, nil
}

// read takes the datagrams until the socket is closed.
func (s *Socket) read() {
	buf := make([]byte, 4096)
	for {
		n, _, err := s.conn.ReadFromUnix(buf)
		if err != nil {
			return
		}
		var ready bool
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			switch k, v, _ := strings.Cut(line, "="); k {
			case "READY":
				ready = ready || v == "1"
			case "STATUS":
				s.mu.Lock()
				s.status = v
				s.mu.Unlock()
			}
		}
		if ready {
			s.once.Do(func() { close(s.ready) })
		}
	}
}

// Env returns the NOTIFY_SOCKET=… entry to add to the child's environment.
func (s *Socket) Env() string { return Env + "=" + s.conn.LocalAddr().String() }

// Ready is closed once the child has sent READY=1.
func (s *Socket) Ready() <-chan struct{} { return s.ready }

// Status returns the last STATUS= line the child sent ("" if none).
func (s *Socket) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Wait waits until the child is ready, exited (closed once the child has
// exited) is closed, or within has passed. It returns nil, ErrExited, or an
// error saying the child did not report ready within the bound.
func (s *Socket) Wait(within time.Duration, exited <-chan struct{}) error {
	bound := time.NewTimer(within)
	defer bound.Stop()
	select {
	case <-s.ready:
		return nil
	case <-exited:
		select {
		case <-s.ready: // ready, then gone: for the caller's next request to tell
			return nil
		default:
			return ErrExited
		}
	case <-bound.C:
		return NotReady(within)
	}
}

// NotReady is the error of a child that did not report ready within d.
func NotReady(d time.Duration) error {
	return fmt.Errorf("the process did not report ready (READY=1 on %s) within %v", Env, d)
}

// Close closes and removes the socket.
func (s *Socket) Close() {
	s.conn.Close()
	os.RemoveAll(s.dir)
}

// Child is a child process started by Start. Its Wait returns the
// process's exit (Start's goroutine is the one that waits for it), so
// callers use it as they would exec.Cmd's.
type Child struct {
	*exec.Cmd
	exited chan struct{} // closed once reaped; then err is set
	err    error
}

// Start starts cmd (its environment is os.Environ() unless cmd.Env is set)
// with a notification socket and waits until it reports ready, failing
// the test when it exits first (at once, with its exit status) or is not
// ready within the bound (it is then killed). The caller still kills and
// waits for the child.
func Start(t testing.TB, cmd *exec.Cmd, within time.Duration) *Child {
	t.Helper()
	c, err := start(cmd, within)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start is Start, returning why it failed.
func start(cmd *exec.Cmd, within time.Duration) (*Child, error) {
	s, err := Listen()
	if err != nil {
		return nil, err
	}
	defer s.Close() // not needed once the child is ready
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, s.Env())
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{Cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	err = s.Wait(within, c.exited)
	if err == nil {
		return c, nil
	}
	what := fmt.Sprintf("%s (pid %d)", filepath.Base(cmd.Path), cmd.Process.Pid)
	if errors.Is(err, ErrExited) {
		status := "exit status 0"
		if c.err != nil {
			status = c.err.Error()
		}
		return nil, fmt.Errorf("%s: %w (%s)", what, err, status)
	}
	cmd.Process.Kill()
	<-c.exited
	return nil, fmt.Errorf("%s: %w; killed", what, err)
}

// Wait waits for the child to exit and returns how (exec.Cmd.Wait's error).
func (c *Child) Wait() error {
	<-c.exited
	return c.err
}

// Exited is closed once the child has exited.
func (c *Child) Exited() <-chan struct{} { return c.exited }

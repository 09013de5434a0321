package testbed

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testbin"
	"github.com/cohort-dev/cohort/internal/testport"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// Cohort is a `cohort serve` child process on a disk store.
type Cohort struct {
	Bin, Dir, Addr string
	// Args are more flags of `cohort serve`, given at every (re)start.
	Args []string
	// Log, if set, receives the process's output (else the test
	// binary's stderr); set it before a (re)start.
	Log io.Writer
	p   *process // the last one started
}

// process is one run of the child.
type process struct {
	cmd    *exec.Cmd
	out    *tail
	killed atomic.Bool   // by Kill: its exit is the test's doing
	exited chan struct{} // closed once reaped; then err is set
	err    error         // Wait's: the exit status
}

// tailLines is how many of its last lines of output a process keeps for
// Explain.
const tailLines = 20

// tail keeps the last tailLines lines written to it.
type tail struct {
	mu    sync.Mutex
	lines []string
	part  string
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part += string(p)
	for {
		line, rest, ok := strings.Cut(w.part, "\n")
		if !ok {
			break
		}
		w.part = rest
		w.lines = append(w.lines, line)
		if len(w.lines) > tailLines {
			w.lines = w.lines[len(w.lines)-tailLines:]
		}
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := w.lines
	if w.part != "" {
		lines = append(lines[:len(lines):len(lines)], w.part)
	}
	if len(lines) == 0 {
		return "no output"
	}
	return "its last lines of output:\n\t" + strings.Join(lines, "\n\t")
}

// BuildCohort compiles cmd/cohort once per test binary (internal/testbin).
func BuildCohort(t testing.TB) string {
	t.Helper()
	return testbin.Cohort(t)
}

// StartCohort runs `cohort serve` on a reserved 127.0.0.1 port and data dir,
// waiting until it accepts connections. It is killed at cleanup.
func StartCohort(t testing.TB, dir string) *Cohort {
	t.Helper()
	testwait.WallClock(t, "stock Kafka clients against a cohort process")
	// A port below the ephemeral range, held for this test binary
	// (internal/testport): the process restarts on the same address, and
	// an ephemeral port freed here may meanwhile become the local port of
	// another test's outgoing connection.
	c := &Cohort{Bin: BuildCohort(t), Dir: dir, Addr: testport.Reserve(t)}
	c.Start(t)
	t.Cleanup(func() { c.Kill() })
	return c
}

// startWithin bounds a (re)start: the time until the process listens.
const startWithin = 30 * time.Second

// Start (re)starts the process on the same address and directory and waits
// until it listens there. A process that exits first, or a port some other
// process listens on, fails the test at once, saying so (Explain).
func (c *Cohort) Start(t testing.TB) {
	t.Helper()
	if err := c.start(startWithin); err != nil {
		t.Fatal(err)
	}
}

// start is Start, returning why it failed (the process then killed).
func (c *Cohort) start(within time.Duration) error {
	cmd := exec.Command(c.Bin, "serve", "--listen", c.Addr, "--data-dir", c.Dir,
		"--initial-rebalance-delay", "0", "--min-session-timeout", "1s", "--log-level", "warn")
	cmd.Args = append(cmd.Args, c.Args...)
	p := &process{cmd: cmd, out: &tail{}, exited: make(chan struct{})}
	var log io.Writer = os.Stderr
	if c.Log != nil {
		log = c.Log
	}
	cmd.Stdout = io.MultiWriter(p.out, log)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	c.p = p
	if err := c.waitListening(within); err != nil {
		why := c.Explain()
		c.Kill()
		return fmt.Errorf("cohort on %s: %w; %s", c.Addr, err, why)
	}
	return nil
}

// errForeignListener: what accepts connections on the child's address is
// another process.
var errForeignListener = errors.New("a connection opened, but the listener is not the cohort process's")

// waitListening waits until a TCP connection to c.Addr opens and (where
// /proc tells) the listener is c's process: a connection that opens while
// the child has not bound yet would be another's listener, or the dial's
// own socket connected to itself (a port in the ephemeral range), and the
// request a test sends next would be refused.
func (c *Cohort) waitListening(within time.Duration) error {
	p := c.p
	deadline := time.Now().Add(within)
	for {
		select {
		case <-p.exited:
			return errors.New("the process exited before it was seen listening")
		default:
		}
		if nc, err := net.DialTimeout("tcp", c.Addr, 200*time.Millisecond); err == nil {
			nc.Close()
			pids, known := testport.Listeners(c.Addr)
			if !known || slices.Contains(pids, p.cmd.Process.Pid) {
				return nil
			}
			if len(pids) > 0 {
				return errForeignListener
			}
			// No listener at all: the dial met itself, or a listener
			// closed meanwhile. Not ready.
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("did not listen within %v", within)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Explain says, for the message of a failed request to the process, whether
// it is still running (else how it ended and its last lines of output) and
// which processes hold sockets on its port.
func (c *Cohort) Explain() string {
	var state string
	switch p := c.p; {
	case p == nil:
		state = "the cohort process was never started"
	default:
		select {
		case <-p.exited:
			how := "exited by itself"
			if p.killed.Load() {
				how = "was killed by the test"
			}
			state = fmt.Sprintf("the cohort process (pid %d) %s (%v); %s", p.cmd.Process.Pid, how, exitStatus(p.err), p.out)
		default:
			state = fmt.Sprintf("the cohort process (pid %d) is running", p.cmd.Process.Pid)
		}
	}
	return state + "; " + testport.Holders(c.Addr)
}

// exitStatus is how Wait's error reads in Explain.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// Kill SIGKILLs the process and reaps it; Explain still tells of it.
func (c *Cohort) Kill() {
	p := c.p
	if p == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	p.killed.Store(true)
	p.cmd.Process.Kill()
	<-p.exited
}

package testbed

import (
	"errors"
	"fmt"
	"io"
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
	"github.com/cohort-dev/cohort/internal/testready"
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
// waiting until it reports ready. It is killed at cleanup.
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

// startWithin bounds a (re)start: the time until the process reports ready.
const startWithin = 30 * time.Second

// Start (re)starts the process on the same address and directory and waits
// until it reports ready (READY=1 on its NOTIFY_SOCKET: its store open, its
// listener bound and served; internal/testready). A process that exits
// first, or a port some other process listens on, fails the test at once,
// saying so (Explain).
func (c *Cohort) Start(t testing.TB) {
	t.Helper()
	if err := c.start(startWithin); err != nil {
		t.Fatal(err)
	}
}

// start is Start, returning why it failed (the process then killed).
func (c *Cohort) start(within time.Duration) error {
	sock, err := testready.Listen()
	if err != nil {
		return err
	}
	defer sock.Close() // of no use once the process is ready
	cmd := exec.Command(c.Bin, "serve", "--listen", c.Addr, "--data-dir", c.Dir,
		"--initial-rebalance-delay", "0", "--min-session-timeout", "1s", "--log-level", "warn")
	cmd.Args = append(cmd.Args, c.Args...)
	cmd.Env = append(os.Environ(), sock.Env())
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
	if err := c.waitReady(sock, within); err != nil {
		why := c.Explain()
		c.Kill()
		return fmt.Errorf("cohort on %s: %w; %s", c.Addr, err, why)
	}
	return nil
}

// errForeignListener: while the child starts, another process listens on
// its address.
var errForeignListener = errors.New("another process listens on the cohort process's address")

// foreignEvery is how often waitReady looks for another process's listener.
const foreignEvery = 50 * time.Millisecond

// waitReady waits until the child reports ready on sock. A TCP connection
// to c.Addr is no such sign: it opens once anything listens there (another
// process, or the child before it has finished starting or just before it
// fails). It fails at once when the child exits first, and when (where
// /proc tells) another process listens on c.Addr: the child cannot bind
// it, and requests sent there would reach the other process.
func (c *Cohort) waitReady(sock *testready.Socket, within time.Duration) error {
	p := c.p
	bound := time.NewTimer(within)
	defer bound.Stop()
	look := time.NewTicker(foreignEvery)
	defer look.Stop()
	for {
		select {
		case <-sock.Ready():
			return nil
		case <-p.exited:
			select {
			case <-sock.Ready(): // ready, then gone: the next request tells
				return nil
			default:
				return testready.ErrExited
			}
		case <-bound.C:
			return testready.NotReady(within)
		case <-look.C:
			if pids, _ := testport.Listeners(c.Addr); foreign(pids, p.cmd.Process.Pid) {
				return errForeignListener
			}
		}
	}
}

// foreign reports whether the listeners' holders (testport.Listeners)
// include a known process and not child. A listener whose holder was not
// found (pid 0: it closed while /proc was read) tells nothing.
func foreign(pids []int, child int) bool {
	return !slices.Contains(pids, child) && slices.ContainsFunc(pids, func(pid int) bool { return pid != 0 })
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

// Package testchild runs the current test binary again as a child process,
// for tests that need a real process to SIGKILL or SIGSTOP (one whose
// cleanup never runs). The test's TestMain looks for an environment variable
// the parent sets and runs the child's part instead of the tests.
package testchild

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Child is a running copy of the test binary.
type Child struct {
	Cmd    *exec.Cmd
	once   sync.Once
	stderr *lastLines
}

// Start runs the test binary with no tests (-test.run=^$) and env added to
// the environment. Its standard error goes to t.Log; it is killed if this
// process dies, and killed and waited for when the test ends (or by Kill).
// The scanner reads its standard output.
func Start(t testing.TB, env ...string) (*Child, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	errs := &lastLines{}
	cmd.Stderr = logWriter{t, errs}
	killWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{Cmd: cmd, stderr: errs}
	t.Cleanup(c.Kill)
	return c, bufio.NewScanner(out)
}

// Kill kills the child (stopped or not) and waits for it; later calls do
// nothing.
func (c *Child) Kill() {
	c.once.Do(func() {
		c.Cmd.Process.Kill()
		c.Cmd.Wait()
	})
}

// Report kills the child if it still runs, waits for it, and says how it
// ended (its exit status, or the signal that ended it) and what it last
// wrote to standard error: for the failure of a test whose child ended, or
// did not answer, before it gave what the test waited for. Its standard
// output is closed once Report returns (exec.Cmd.Wait): read it to its end
// first if what it holds matters.
func (c *Child) Report() string {
	c.Kill()
	lines := c.stderr.lines()
	if len(lines) == 0 {
		return fmt.Sprintf("%v; nothing on its standard error", c.Cmd.ProcessState)
	}
	return fmt.Sprintf("%v; the last %d lines of its standard error:\n%s", c.Cmd.ProcessState, len(lines), strings.Join(lines, "\n"))
}

// Stopped reports whether every thread of the child is stopped (after a
// SIGSTOP has taken effect).
func (c *Child) Stopped() bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", c.Cmd.Process.Pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// logWriter passes a child's standard error to the test's log, and keeps
// its last lines for Report.
type logWriter struct {
	t    testing.TB
	last *lastLines
}

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	w.last.write(p)
	return len(p), nil
}

// keptLines is how many of a child's last lines of standard error Report
// quotes.
const keptLines = 20

// maxLine bounds an unfinished line kept: its end.
const maxLine = 4096

// lastLines keeps the last keptLines lines written to it, each whole
// however the writes cut them.
type lastLines struct {
	mu      sync.Mutex
	done    []string
	partial []byte
}

func (l *lastLines) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.done = append(l.done, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	if len(l.done) > keptLines {
		l.done = append([]string(nil), l.done[len(l.done)-keptLines:]...)
	}
	if len(l.partial) > maxLine {
		l.partial = append([]byte(nil), l.partial[len(l.partial)-maxLine:]...)
	}
}

// lines returns the kept lines, with an unfinished last one.
func (l *lastLines) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.done...)
	if len(l.partial) > 0 {
		out = append(out, string(l.partial))
	}
	if len(out) > keptLines {
		out = out[len(out)-keptLines:]
	}
	return out
}

// Package testchild runs the current test binary again as a child process,
// for tests that need a real process to SIGKILL or SIGSTOP (one whose
// cleanup never runs). The test's TestMain looks for an environment variable
// the parent sets and runs the child's part instead of the tests.
package testchild

import (
	"bufio"
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
	Cmd  *exec.Cmd
	once sync.Once
}

// Start runs the test binary with no tests (-test.run=^$) and env added to
// the environment. Its standard error goes to t.Log; it is killed if this
// process dies, and killed and waited for when the test ends (or by Kill).
// The scanner reads its standard output.
func Start(t testing.TB, env ...string) (*Child, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logWriter{t}
	killWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{Cmd: cmd}
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

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

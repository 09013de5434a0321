package testready

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childEnv makes the test binary a stand-in for `cohort serve` (TestMain):
// "ready" reports ready on NOTIFY_SOCKET and idles; "exit" prints a line and
// exits with status 3 without reporting; "never" idles without reporting.
const childEnv = "COHORT_TEST_TESTREADY_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(fakeServe(mode))
	}
	os.Exit(m.Run())
}

func fakeServe(mode string) int {
	switch mode {
	case "ready":
		c, err := net.Dial("unixgram", os.Getenv(Env))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if _, err := c.Write([]byte("READY=1\nSTATUS=fake serving")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c.Close()
		time.Sleep(time.Minute) // killed by the test long before
	case "exit":
		fmt.Fprintln(os.Stderr, "fake serve: giving up")
		return 3
	case "never":
		time.Sleep(time.Minute)
	}
	return 0
}

// fake is a command running the test binary as a stand-in in mode.
func fake(t *testing.T, mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	return cmd
}

// TestStartReady: a child that sends READY=1 is started and left running;
// its Wait reports its end.
func TestStartReady(t *testing.T) {
	c, err := start(fake(t, "ready"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited():
		t.Fatalf("the child exited: %v", c.Wait())
	default:
	}
	c.Process.Kill()
	if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Wait after Kill: %v, want signal: killed", err)
	}
}

// TestStartExitedBeforeReady: a child that exits without reporting ready
// fails the start at once (not at the bound), with its exit status.
func TestStartExitedBeforeReady(t *testing.T) {
	began := time.Now()
	_, err := start(fake(t, "exit"), time.Minute)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("start: %v, want %v", err, ErrExited)
	}
	if !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("start: %v, want the exit status", err)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("start took %v to see the child gone", took)
	}
}

// TestStartNeverReady: a child that runs but never reports ready fails the
// start at the bound, and is killed.
func TestStartNeverReady(t *testing.T) {
	cmd := fake(t, "never")
	_, err := start(cmd, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not report ready (READY=1 on NOTIFY_SOCKET) within 300ms; killed") {
		t.Fatalf("start: %v, want a child not ready within the bound, killed", err)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.Success() {
		t.Errorf("the child was not killed and reaped: %v", cmd.ProcessState)
	}
}

// TestSocketKeepsStatus: the socket takes several datagrams; READY=1 in
// any of them makes it ready, STATUS is the last one sent.
func TestSocketKeepsStatus(t *testing.T) {
	s, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := strings.TrimPrefix(s.Env(), Env+"=")
	send := func(msg string) {
		c, err := net.Dial("unixgram", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	send("STATUS=loading")
	send("READY=0")
	select {
	case <-s.Ready():
		t.Fatal("ready before READY=1")
	case <-time.After(50 * time.Millisecond):
	}
	send("STATUS=serving\nREADY=1")
	if err := s.Wait(10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if got := s.Status(); got != "serving" {
		t.Errorf("Status %q, want serving", got)
	}
}

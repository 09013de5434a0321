package testbed

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testport"
	"github.com/cohort-dev/cohort/internal/testready"
)

// childEnv makes the test binary a stand-in for `cohort serve` (TestMain):
// "exit" prints a line and exits with status 3 without listening; "idle"
// never listens; "silent" listens on --listen but never reports ready;
// "listen" listens there, reports ready on NOTIFY_SOCKET and, at its first
// accepted connection, prints a line and exits with status 7.
const childEnv = "COHORT_TEST_TESTBED_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(fakeServe(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeServe(mode string, args []string) int {
	addr := ""
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			addr = args[i+1]
		}
	}
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "fake serve: listen "+addr+": bind: address already in use")
		return 3
	case "idle":
		time.Sleep(time.Minute) // killed by the test long before
		return 0
	case "silent", "listen":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if mode == "silent" {
			time.Sleep(time.Minute)
			return 0
		}
		if err := reportReady(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		c.Close()
		fmt.Println("fake serve: giving up after a connection")
		return 7
	}
	return 2
}

// reportReady sends READY=1 to NOTIFY_SOCKET, as cohort serve does.
func reportReady() error {
	c, err := net.Dial("unixgram", os.Getenv(testready.Env))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("READY=1"))
	return err
}

// fakeCohort is a Cohort running the test binary as its stand-in.
func fakeCohort(t *testing.T, mode string) *Cohort {
	t.Setenv(childEnv, mode)
	c := &Cohort{Bin: os.Args[0], Dir: t.TempDir(), Addr: testport.Reserve(t), Log: &strings.Builder{}}
	t.Cleanup(c.Kill)
	return c
}

// TestCohortExitsBeforeReady: a child that exits before it reports ready
// fails the start at once (not at the start's time bound), with its exit
// status and its last lines.
func TestCohortExitsBeforeReady(t *testing.T) {
	c := fakeCohort(t, "exit")
	began := time.Now()
	err := c.start(time.Minute)
	if err == nil {
		t.Fatal("start of a child that exits: no error")
	}
	for _, want := range []string{"exited before it reported ready", "exited by itself (exit status 3)", "bind: address already in use",
		"nothing listens on port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start: %v\nwant it to say %q", err, want)
		}
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("start took %v to see the child gone", took)
	}
}

// TestCohortPortTakenByAnother: another process listening on the child's
// address (here the test itself) fails the start at once, before the
// start's bound, naming the listener's holder.
func TestCohortPortTakenByAnother(t *testing.T) {
	c := fakeCohort(t, "idle")
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	began := time.Now()
	err = c.start(time.Minute)
	if err == nil {
		t.Fatal("start succeeded though the port is another process's listener")
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("start took %v to see the other listener", took)
	}
	if !errors.Is(err, errForeignListener) {
		t.Errorf("start: %v, want %v", err, errForeignListener)
	}
	holder := fmt.Sprintf("listening on port %s: %s held by pid %d (", c.Addr[strings.LastIndexByte(c.Addr, ':')+1:], c.Addr, os.Getpid())
	if !strings.Contains(err.Error(), holder) {
		t.Errorf("start: %v\nwant it to name the holder: %q", err, holder)
	}
}

// TestCohortExplainsADeadChild: once the child listened and then died,
// Explain says it exited by itself, with its status and last lines, and
// that nothing listens on its port; while it runs, that it runs and that it
// holds the listener.
func TestCohortExplainsADeadChild(t *testing.T) {
	c := fakeCohort(t, "listen")
	if err := c.start(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	pid := c.p.cmd.Process.Pid
	running := c.Explain()
	for _, want := range []string{fmt.Sprintf("(pid %d) is running", pid), fmt.Sprintf("%s held by pid %d (", c.Addr, pid)} {
		if !strings.Contains(running, want) {
			t.Errorf("Explain of a running child: %q\nwant %q", running, want)
		}
	}
	nc, err := net.Dial("tcp", c.Addr) // the child's first connection: it exits
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	select {
	case <-c.p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not exit")
	}
	dead := c.Explain()
	for _, want := range []string{fmt.Sprintf("(pid %d) exited by itself (exit status 7)", pid),
		"giving up after a connection", "nothing listens on port"} {
		if !strings.Contains(dead, want) {
			t.Errorf("Explain of a dead child: %q\nwant %q", dead, want)
		}
	}
	c.Kill() // reaped already: nothing to do
	if got := c.Explain(); !strings.Contains(got, "exited by itself") {
		t.Errorf("Explain after Kill of a dead child: %q, want it still exited by itself", got)
	}
}

// TestCohortNeverReady: a child that listens on its address but never
// reports ready fails the start at the bound, where a connection to its
// port would have opened at once; it is killed, and the error says it was
// running and held its port.
func TestCohortNeverReady(t *testing.T) {
	c := fakeCohort(t, "silent")
	err := c.start(time.Second)
	if err == nil {
		t.Fatal("start of a child that never reports ready: no error")
	}
	pid := c.p.cmd.Process.Pid
	for _, want := range []string{"did not report ready (READY=1 on NOTIFY_SOCKET) within 1s", fmt.Sprintf("(pid %d) is running", pid),
		fmt.Sprintf("%s held by pid %d (", c.Addr, pid)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start: %v\nwant it to say %q", err, want)
		}
	}
	select {
	case <-c.p.exited:
	default:
		t.Error("the child was not killed")
	}
}

// TestForeignListener: only a listener held by a known process other than
// the child is foreign; one whose holder was not found is not.
func TestForeignListener(t *testing.T) {
	for _, c := range []struct {
		pids []int
		want bool
	}{
		{nil, false},
		{[]int{42}, false},
		{[]int{0}, false},
		{[]int{0, 42}, false},
		{[]int{7}, true},
		{[]int{0, 7}, true},
		{[]int{7, 42}, false},
	} {
		if got := foreign(c.pids, 42); got != c.want {
			t.Errorf("foreign(%v, child 42) = %v, want %v", c.pids, got, c.want)
		}
	}
}

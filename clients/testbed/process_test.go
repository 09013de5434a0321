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
)

// childEnv makes the test binary a stand-in for `cohort serve` (TestMain):
// "exit" prints a line and exits with status 3 without listening; "idle"
// never listens; "listen" listens on --listen and, at its second accepted
// connection (the first is Start's), prints a line and exits with status 7.
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
	case "listen":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for i := 1; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			c.Close()
			if i == 2 {
				fmt.Println("fake serve: giving up after a second connection")
				return 7
			}
		}
	}
	return 2
}

// fakeCohort is a Cohort running the test binary as its stand-in.
func fakeCohort(t *testing.T, mode string) *Cohort {
	t.Setenv(childEnv, mode)
	c := &Cohort{Bin: os.Args[0], Dir: t.TempDir(), Addr: testport.Reserve(t), Log: &strings.Builder{}}
	t.Cleanup(c.Kill)
	return c
}

// TestCohortExitsBeforeListening: a child that exits before it listens
// fails the start at once (not at the start's time bound), with its exit
// status and its last lines.
func TestCohortExitsBeforeListening(t *testing.T) {
	c := fakeCohort(t, "exit")
	began := time.Now()
	err := c.start(time.Minute)
	if err == nil {
		t.Fatal("start of a child that exits: no error")
	}
	for _, want := range []string{"exited before it was seen listening", "exited by itself (exit status 3)", "bind: address already in use",
		"nothing listens on port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start: %v\nwant it to say %q", err, want)
		}
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("start took %v to see the child gone", took)
	}
}

// TestCohortPortTakenByAnother: a connection to the child's address that
// another process's listener accepts (here the test's own) is not taken for
// the child listening: the start fails, naming the listener's holder.
func TestCohortPortTakenByAnother(t *testing.T) {
	c := fakeCohort(t, "idle")
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = c.start(10 * time.Second)
	if err == nil {
		t.Fatal("start succeeded though the port is another process's listener")
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
	nc, err := net.Dial("tcp", c.Addr) // the child's second connection: it exits
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
		"giving up after a second connection", "nothing listens on port"} {
		if !strings.Contains(dead, want) {
			t.Errorf("Explain of a dead child: %q\nwant %q", dead, want)
		}
	}
	c.Kill() // reaped already: nothing to do
	if got := c.Explain(); !strings.Contains(got, "exited by itself") {
		t.Errorf("Explain after Kill of a dead child: %q, want it still exited by itself", got)
	}
}

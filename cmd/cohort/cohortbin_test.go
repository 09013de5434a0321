package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testpar"
)

// The tests that need a real cohort process (signals, exit codes) run this
// test binary as the cohort command: with $COHORT_TEST_AS_MAIN=1 it runs
// main with its arguments instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("COHORT_TEST_AS_MAIN") == "1" {
		if os.Getenv("COHORT_TEST_PEAK_RSS") == "1" {
			// The process's own peak (a fork inherits its parent's
			// in the rusage of the child): TestStoreCopyScale.
			code := run(os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, clock: clock.Real{}})
			status, _ := os.ReadFile("/proc/self/status")
			for line := range strings.Lines(string(status)) {
				if strings.HasPrefix(line, "VmHWM:") {
					fmt.Fprint(os.Stderr, "peak RSS "+line)
				}
			}
			os.Exit(code)
		}
		if os.Getenv("COHORT_TEST_STORECOPY_PAUSE") == "1" {
			// TestStoreCopySIGINT: each partition copied waits for
			// the copy to be stopped.
			testStoreCopyPartitionCopied = func(ctx context.Context, p int32) error {
				fmt.Fprintf(os.Stderr, "test: partition %d copied, waiting\n", p)
				<-ctx.Done()
				return ctx.Err()
			}
		}
		main()
		os.Exit(0)
	}
	// The parallel tests wait on etcd, heartbeats and child processes:
	// four at once rather than GOMAXPROCS' two.
	testpar.Default(4)
	os.Exit(m.Run())
}

// cohortCommand returns a command that runs cohort with args in a child
// process (this test binary as main), killed when ctx ends.
func cohortCommand(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs cohort as a child process")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "COHORT_TEST_AS_MAIN=1")
	return cmd
}

// closedAddr returns a loopback address nothing listens on (it was bound
// and released).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

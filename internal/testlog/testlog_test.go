package testlog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// lateEnv makes the test binary run TestLateLogChild, whose logger is
// used once every test has finished.
const lateEnv = "COHORT_TEST_LATELOG"

var (
	runEnded = make(chan struct{}) // closed by TestMain once m.Run returns
	lateDone = make(chan struct{}) // closed by the child's goroutine after its late line
)

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv(lateEnv) != "" {
		close(runEnded)
		select {
		case <-lateDone:
		case <-time.After(10 * time.Second):
			fmt.Fprintln(os.Stderr, "the late line was never written")
			code = 1
		}
	}
	os.Exit(code)
}

// fakeTB records what Writer sends to a test; Log after end panics, as
// testing's does once no enclosing test is left to take the line.
type fakeTB struct {
	testing.TB
	logs     []string
	cleanups []func()
	ended    bool
}

func (f *fakeTB) Name() string      { return "TestFake" }
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Log(a ...any) {
	if f.ended {
		panic("Log after TestFake has completed")
	}
	f.logs = append(f.logs, fmt.Sprint(a...))
}

func (f *fakeTB) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.ended = true
}

func TestWriterRoutesLateLines(t *testing.T) {
	f := &fakeTB{}
	var late bytes.Buffer
	l := slog.New(slog.NewTextHandler(writerTo(f, &late), nil))
	l.Info("while running")
	if len(f.logs) != 1 || !strings.Contains(f.logs[0], "msg=\"while running\"") || strings.HasSuffix(f.logs[0], "\n") {
		t.Fatalf("lines sent to the test: %q", f.logs)
	}
	if late.Len() != 0 {
		t.Fatalf("written elsewhere while the test ran: %q", late.String())
	}
	f.end()
	l.Warn("after the end")
	if len(f.logs) != 1 {
		t.Fatalf("lines sent to the test after it ended: %q", f.logs[1:])
	}
	if got := late.String(); !strings.HasPrefix(got, "TestFake (logged after the test ended): ") || !strings.Contains(got, "after the end") {
		t.Fatalf("late line %q", got)
	}
}

// TestLateLogChild is run by TestLateLog in a child process: its logger
// is used by a goroutine once every test of the binary has finished.
func TestLateLogChild(t *testing.T) {
	if os.Getenv(lateEnv) == "" {
		t.Skip("run by TestLateLog in a child process")
	}
	l := slog.New(slog.NewTextHandler(Writer(t), nil))
	l.Info("during the test")
	go func() {
		<-runEnded
		l.Warn("after every test")
		// Not deferred: were Warn to panic, TestMain must not exit
		// (with the code of a passing run) before the crash.
		close(lateDone)
	}()
}

// TestLateLog checks, with the real testing package, that a line logged
// through Writer after the whole run has ended reaches stderr and does not
// panic the binary.
func TestLateLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLateLogChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), lateEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "during the test") {
		t.Errorf("the line logged during the test is not in the test's output:\n%s", stdout.String())
	}
	if s := stderr.String(); !strings.Contains(s, "TestLateLogChild (logged after the test ended): ") || !strings.Contains(s, "after every test") {
		t.Errorf("the late line is not on stderr:\n%s", s)
	}
}

func TestPrintfRoutesLateLines(t *testing.T) {
	f := &fakeTB{}
	var late bytes.Buffer
	logf := printfTo(writerTo(f, &late), "client-1 kafka-go: ")
	logf("dial %s: %v", "127.0.0.1:9092", "refused")
	if len(f.logs) != 1 || f.logs[0] != "client-1 kafka-go: dial 127.0.0.1:9092: refused" {
		t.Fatalf("lines sent to the test: %q", f.logs)
	}
	f.end()
	logf("closing %d", 3)
	if len(f.logs) != 1 {
		t.Fatalf("lines sent to the test after it ended: %q", f.logs[1:])
	}
	if got := late.String(); got != "TestFake (logged after the test ended): client-1 kafka-go: closing 3\n" {
		t.Fatalf("late line %q", got)
	}
}

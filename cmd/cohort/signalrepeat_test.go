package main

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// newStopRequest is a stop request on a fake clock nobody moves.
func newStopRequest() *stopRequest {
	return &stopRequest{now: clock.NewFake(time.Unix(1_700_000_000, 0)).Now}
}

// repeatCases are a first SIGTERM's followers: whether each repeats it.
var repeatCases = []struct {
	name    string
	after   time.Duration // from the first signal
	second  os.Signal
	repeats bool
}{
	{"same signal at once", 0, syscall.SIGTERM, true},
	{"same signal just inside the window", sameStopWindow - time.Millisecond, syscall.SIGTERM, true},
	{"same signal at the window's end", sameStopWindow, syscall.SIGTERM, false},
	{"same signal later", 5 * time.Second, syscall.SIGTERM, false},
	{"another signal at once", 0, syscall.SIGINT, false},
}

// repeatSetup is a log to read back and a stop request on a fake clock.
func repeatSetup() (*bytes.Buffer, *slog.Logger, *clock.Fake, *stopRequest) {
	var buf bytes.Buffer
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	return &buf, slog.New(slog.NewTextHandler(&buf, nil)), clk, &stopRequest{now: clk.Now}
}

// TestRepeatedStopSignalDuringShutdown: GNU timeout sends SIGTERM to
// cohort serve and to its process group at once, and the second copy used
// to cut the graceful shutdown short ("signal during the shutdown:
// exiting"). The same signal within sameStopWindow of the one that began
// the shutdown is now the same request, logged and ignored; the same
// signal later, or another signal, still ends the wait at once.
func TestRepeatedStopSignalDuringShutdown(t *testing.T) {
	for _, tc := range repeatCases {
		t.Run(tc.name, func(t *testing.T) {
			buf, log, clk, req := repeatSetup()
			req.take(syscall.SIGTERM) // what serve's loop does with the first
			clk.Advance(tc.after)
			// Unbuffered: each send returns once finishShutdown took it,
			// so the signal is weighed before Close's result comes.
			done, stop := make(chan error), make(chan os.Signal)
			res := make(chan error, 1)
			go func() { res <- finishShutdown(done, stop, req, nil, nil, log) }()
			stop <- tc.second
			var err error
			if tc.repeats {
				select {
				case done <- nil: // Close returns: the shutdown finished cleanly
				case err = <-res: // (ended by the repeat)
					res <- err
				}
			}
			select {
			case err = <-res:
				if tc.repeats && (err != nil || !strings.Contains(buf.String(), "stopped cleanly")) {
					t.Errorf("a repeated %v ended the shutdown: %v\n%s", tc.second, err, buf.String())
				}
				if !tc.repeats && (err == nil || !strings.Contains(buf.String(), "signal during the shutdown: exiting")) {
					t.Errorf("a second %v did not end the wait: %v\n%s", tc.second, err, buf.String())
				}
				if got := strings.Contains(buf.String(), "same request, ignored"); got != tc.repeats {
					t.Errorf("logged the repeat as ignored: %v, want %v\n%s", got, tc.repeats, buf.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("finishShutdown did not return")
			}
		})
	}
}

// TestRepeatedStopSignalDuringStart: the same in the start: a SIGTERM that
// repeats the first within sameStopWindow is ignored (the node still stops
// cleanly once up), a later one or another signal exits at once.
func TestRepeatedStopSignalDuringStart(t *testing.T) {
	exits := make(chan os.Signal, 1)
	defer func(f func(os.Signal)) { exitAsSignal = f }(exitAsSignal)
	exitAsSignal = func(sg os.Signal) { exits <- sg }
	taken := func(stop chan os.Signal) {
		testwait.For(t, 10*time.Second, "the watcher takes the signal", func() bool { return len(stop) == 0 })
	}
	for _, tc := range repeatCases {
		t.Run(tc.name, func(t *testing.T) {
			buf, log, clk, req := repeatSetup()
			stop := make(chan os.Signal, 1)
			started := watchStopDuringStart(stop, req, log)
			stop <- syscall.SIGTERM
			taken(stop)
			clk.Advance(tc.after)
			stop <- tc.second
			taken(stop)
			started() // returns once the watcher has weighed the second signal
			select {
			case sg := <-exits:
				if tc.repeats {
					t.Fatalf("a repeated %v during the start ended the process\n%s", sg, buf.String())
				}
				if sg != tc.second {
					t.Errorf("exited as %v, want %v", sg, tc.second)
				}
				return
			default:
			}
			if !tc.repeats {
				t.Fatalf("a second %v during the start did not end the process\n%s", tc.second, buf.String())
			}
			if sg := <-stop; sg != syscall.SIGTERM {
				t.Errorf("serve's loop got %v, want the first SIGTERM", sg)
			}
			if !strings.Contains(buf.String(), "same request, ignored") {
				t.Errorf("the repeat was not logged:\n%s", buf.String())
			}
		})
	}
}

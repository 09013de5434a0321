package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignalEndsSlowShutdown: while the node's Close has not
// returned (a backup under way, a stuck disk), a second SIGINT or SIGTERM
// makes cohort serve exit at once, with status 1 and a line saying so, as
// an operator pressing Ctrl-C again expects; before, it was ignored without a
// word until Close returned or the 30 s ran out.
func TestSecondSignalEndsSlowShutdown(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	done := make(chan error) // Close never returns
	stop := make(chan os.Signal, 1)
	stop <- syscall.SIGINT
	res := make(chan error, 1)
	go func() { res <- finishShutdown(done, stop, newStopRequest(), nil, nil, log) }()
	select {
	case err := <-res:
		if err == nil || exitCode(err, &bytes.Buffer{}) != 1 {
			t.Errorf("after a second signal: %v, exit code %d; want an error, exit code 1", err, exitCode(err, &bytes.Buffer{}))
		}
		if !strings.Contains(buf.String(), "signal during the shutdown") {
			t.Errorf("nothing logged about the second signal: %q", buf.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second signal did not end the wait for a Close that does not return")
	}

	// Without a second signal: Close's result, or the timeout.
	buf.Reset()
	done = make(chan error, 1)
	done <- nil
	if err := finishShutdown(done, make(chan os.Signal), newStopRequest(), nil, nil, log); err != nil || !strings.Contains(buf.String(), "stopped cleanly") {
		t.Errorf("clean close: %v, logged %q", err, buf.String())
	}
	done = make(chan error, 1)
	done <- errors.New("store failed")
	stopped := errors.New("the store failed first")
	if err := finishShutdown(done, make(chan os.Signal), newStopRequest(), nil, stopped, log); err != stopped {
		t.Errorf("after the node stopped by itself: %v, want %v", err, stopped)
	}
	timeout := make(chan time.Time, 1)
	timeout <- time.Time{}
	if err := finishShutdown(make(chan error), make(chan os.Signal), newStopRequest(), timeout, nil, log); err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("timeout: %v", err)
	}
}

package main

import (
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testwait"
)

// TestStopSignalAcrossTheStart: a stop signal while the node starts is kept
// and handed to serve's loop once the node is up, which stops it cleanly (the
// node may answer on its port before its start returns); a second one during
// the start ends the process at once; one after the start stays queued for
// the loop. serve used to catch SIGINT and SIGTERM only after the start, and
// a first version of this change ended the process on a signal during the
// start: either way a SIGTERM sent as soon as the port answered killed the
// process without its clean stop (TestSIGTERMStopsWhileAReloadHangs in node
// failed so, "exit after SIGTERM: signal: terminated", with the log line
// "stop signal during the start: exiting").
func TestStopSignalAcrossTheStart(t *testing.T) {
	exits := make(chan os.Signal, 1)
	defer func(f func(os.Signal)) { exitAsSignal = f }(exitAsSignal)
	exitAsSignal = func(sg os.Signal) { exits <- sg }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	taken := func(stop chan os.Signal) {
		testwait.For(t, 10*time.Second, "the watcher takes the signal", func() bool { return len(stop) == 0 })
	}

	// One signal during the start: kept for the loop, no exit.
	stop := make(chan os.Signal, 1)
	started := watchStopDuringStart(stop, newStopRequest(), log)
	stop <- syscall.SIGTERM
	taken(stop)
	started()
	select {
	case sg := <-exits:
		t.Fatalf("one stop signal during the start ended the process (%v); want a clean stop once up", sg)
	default:
	}
	select {
	case sg := <-stop:
		if sg != syscall.SIGTERM {
			t.Fatalf("serve's loop got %v, want SIGTERM", sg)
		}
	default:
		t.Fatal("a SIGTERM during the start did not reach serve's loop once the node was up")
	}

	// Two signals during the start: the second ends the process.
	stop = make(chan os.Signal, 1)
	started = watchStopDuringStart(stop, newStopRequest(), log)
	stop <- syscall.SIGTERM
	taken(stop)
	stop <- syscall.SIGINT
	select {
	case sg := <-exits:
		if sg != syscall.SIGINT {
			t.Fatalf("exited as %v, want SIGINT", sg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second stop signal during the start did not end the process")
	}
	started()

	// Once the node is up.
	stop = make(chan os.Signal, 1)
	started = watchStopDuringStart(stop, newStopRequest(), log)
	started()
	stop <- syscall.SIGINT
	if sg := <-stop; sg != syscall.SIGINT {
		t.Fatalf("serve's loop got %v, want SIGINT", sg)
	}
	select {
	case sg := <-exits:
		t.Fatalf("a signal after the start ended the process (%v)", sg)
	default:
	}
}

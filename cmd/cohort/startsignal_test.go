package main

import (
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestStopSignalAcrossTheStart: a stop signal while the node starts ends
// the process (as the signal's default action did); one from the moment the
// node is up stays queued for serve's loop, which stops the node cleanly.
// serve used to catch SIGINT and SIGTERM only some time after the node
// opened its port, so a SIGTERM sent as soon as the port answered killed
// the process without its clean stop (TestSIGTERMStopsWhileAReloadHangs saw
// "exit after SIGTERM: signal: terminated").
func TestStopSignalAcrossTheStart(t *testing.T) {
	exits := make(chan os.Signal, 1)
	defer func(f func(os.Signal)) { exitAsSignal = f }(exitAsSignal)
	exitAsSignal = func(sg os.Signal) { exits <- sg }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// During the start.
	stop := make(chan os.Signal, 1)
	started := watchStopDuringStart(stop, log)
	stop <- syscall.SIGTERM
	select {
	case sg := <-exits:
		if sg != syscall.SIGTERM {
			t.Fatalf("exited as %v, want SIGTERM", sg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a SIGTERM during the start did not end the process")
	}
	started()

	// Once the node is up.
	stop = make(chan os.Signal, 1)
	started = watchStopDuringStart(stop, log)
	started()
	stop <- syscall.SIGINT
	select {
	case sg := <-stop:
		if sg != syscall.SIGINT {
			t.Fatalf("serve's loop got %v, want SIGINT", sg)
		}
	default:
		t.Fatal("a SIGINT after the start was taken from serve's loop")
	}
	select {
	case sg := <-exits:
		t.Fatalf("a signal after the start ended the process (%v)", sg)
	default:
	}
}

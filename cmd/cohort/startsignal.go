package main

import (
	"log/slog"
	"os"
)

// exitAsSignal ends the process as sg's default action would; a variable
// for tests.
var exitAsSignal = exitBySignal

// watchStopDuringStart reads stop (SIGINT, SIGTERM) while the node starts.
// The node may already answer on its port before its start returns, so a
// first stop signal is kept and handed to the caller's loop once started is
// called: the node then stops cleanly as soon as it is up (a start that
// fails ends the process anyway). A second stop signal during the start
// ends the process at once, as the signal's default action would (nothing
// acknowledged is lost: the node answers a write only once it is durable),
// for an operator who will not wait for a slow start. Before, stop signals
// were caught only after the start, so one that came while the port already
// answered killed the process without its clean stop.
func watchStopDuringStart(stop chan os.Signal, log *slog.Logger) (started func()) {
	var first os.Signal
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case first = <-stop:
			log.Info("stop signal during the start: the node stops once it is up; a second signal exits at once", "signal", first.String())
		case <-quit:
			return
		}
		select {
		case sg := <-stop:
			log.Warn("second stop signal during the start: exiting", "signal", sg.String())
			exitAsSignal(sg)
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-exited
		if first != nil {
			select {
			case stop <- first:
			default: // a second signal is queued already: the loop stops on it
			}
		}
	}
}

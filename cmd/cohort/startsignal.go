package main

import (
	"log/slog"
	"os"
	"sync"
)

// exitAsSignal ends the process as sg's default action would; a variable
// for tests.
var exitAsSignal = exitBySignal

// watchStopDuringStart reads stop (SIGINT, SIGTERM) while the node starts.
// A stop signal before started is called ends the process at once, as the
// signal's default action would (the node has acknowledged nothing yet,
// and a long load should not hold a stop up). The returned started hands
// stop over to the caller: a signal that arrives from then on stays queued
// on stop for the caller's loop, which shuts the node down cleanly.
// Catching the stop signals only after the node was up, as cohort serve
// did, left a window in which the port already answered and a SIGTERM
// still killed the process without a clean stop.
func watchStopDuringStart(stop chan os.Signal, log *slog.Logger) (started func()) {
	var mu sync.Mutex
	up := false
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case sg := <-stop:
			mu.Lock()
			defer mu.Unlock()
			if up {
				// The node came up meanwhile: the caller's loop takes it.
				select {
				case stop <- sg:
				default: // another stop signal is queued already
				}
				return
			}
			log.Info("stop signal during the start: exiting", "signal", sg.String())
			exitAsSignal(sg)
		case <-quit:
		}
	}()
	return func() {
		mu.Lock()
		up = true
		mu.Unlock()
		close(quit)
		<-exited
	}
}

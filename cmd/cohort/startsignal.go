package main

import (
	"log/slog"
	"os"
	"sync"
	"time"
)

// exitAsSignal ends the process as sg's default action would; a variable
// for tests.
var exitAsSignal = exitBySignal

// sameStopWindow is how long after the first stop signal another of the
// same kind counts as the same request rather than a second one. GNU
// timeout (and supervisors that signal both a process and its group) send
// SIGTERM twice at once, within microseconds; an operator pressing Ctrl-C
// again to cut a slow stop short is slower than this.
const sameStopWindow = time.Second

// stopRequest is the stop asked for by the first SIGINT or SIGTERM that
// cohort serve took, against which later ones are weighed. Safe for use by
// the start watcher and serve's loop.
type stopRequest struct {
	now func() time.Time // the time source; time.Now in cohort serve

	mu    sync.Mutex
	first os.Signal // nil: no stop asked for yet
	at    time.Time
}

// take records sg as the stop request unless one is recorded already.
func (r *stopRequest) take(sg os.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == nil {
		r.first, r.at = sg, r.now()
	}
}

// repeats reports whether sg, a stop signal that came after the request was
// taken, is the same request again: the same signal within sameStopWindow
// of the first. A different signal (SIGINT after SIGTERM), or the same one
// later, asks to exit at once.
func (r *stopRequest) repeats(sg os.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first != nil && sg == r.first && r.now().Sub(r.at) < sameStopWindow
}

// ignoreRepeat logs sg, a repeat of the stop request, as ignored.
func ignoreRepeat(log *slog.Logger, sg os.Signal) {
	log.Info("stop signal repeated within "+sameStopWindow.String()+" of the first: the same request, ignored "+
		"(a later one, or another signal, exits at once)", "signal", sg.String())
}

// watchStopDuringStart reads stop (SIGINT, SIGTERM) while the node starts.
// The node may already answer on its port before its start returns, so a
// first stop signal is kept (in req) and handed to the caller's loop once
// started is called: the node then stops cleanly as soon as it is up (a
// start that fails ends the process anyway). A second stop signal during
// the start ends the process at once, as the signal's default action would
// (nothing acknowledged is lost: the node answers a write only once it is
// durable), for an operator who will not wait for a slow start; one that
// repeats the first (req.repeats) is the same request, and is ignored.
// Before, stop signals were caught only after the start, so one that came
// while the port already answered killed the process without its clean
// stop.
func watchStopDuringStart(stop chan os.Signal, req *stopRequest, log *slog.Logger) (started func()) {
	var first os.Signal
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case first = <-stop:
			req.take(first)
			log.Info("stop signal during the start: the node stops once it is up; a second signal exits at once", "signal", first.String())
		case <-quit:
			return
		}
		for {
			select {
			case sg := <-stop:
				if req.repeats(sg) {
					ignoreRepeat(log, sg)
					continue
				}
				log.Warn("second stop signal during the start: exiting", "signal", sg.String())
				exitAsSignal(sg)
				return
			case <-quit:
				return
			}
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

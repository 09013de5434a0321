// Package clock is the source of time for cohort's group members (member,
// election, workers): what time it is, and timers that fire later.
//
// Programs leave the clock unset and get Real, the system clock. Tests set
// member.Config.Clock to a Fake instead: a clock that stands still until the
// test moves it with Advance or Set. The heartbeat schedule, the retry
// backoff and the watchdog that declares a session lost then run only when
// the test says so, so a test can, for example, cut a member off from its
// coordinator and check that its work is cancelled exactly when the session
// would have expired, without sleeping and without depending on how busy
// the machine is.
//
// Clock and Timer are interfaces, so a program may also supply a clock of
// its own (one shared with the rest of its test harness, say).
package clock

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers. Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now returns the current time on this clock.
	Now() time.Time
	// NewTimer returns a running timer that sends the time on its channel
	// once d has passed on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that cohort's members use, as an
// interface so that a fake clock can hand out timers of its own.
type Timer interface {
	// C returns the channel the timer sends on when it fires. It has a
	// buffer of one and the timer never blocks on it.
	C() <-chan time.Time
	// Reset re-arms the timer to fire d from now. As with a Go 1.23+
	// time.Timer, a tick that was due but not yet received is dropped.
	Reset(d time.Duration)
	// Stop disarms the timer and reports whether it was armed.
	Stop() bool
}

// Real is the system clock: time.Now and time.NewTimer. Its zero value is
// ready to use, and it is what a member uses when Config.Clock is nil.
type Real struct{}

// Now implements Clock.
func (Real) Now() time.Time { return time.Now() }

// NewTimer implements Clock.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop() bool            { return r.t.Stop() }

// Fake is a clock for tests: its time moves only when Advance or Set is
// called, and its timers fire then, never on their own. A timer whose
// deadline the time reaches or passes is sent the new time on its channel
// (without blocking: a tick nobody has received yet is not doubled), in
// deadline order. A timer made or reset with a deadline that has already
// been reached fires at once.
//
// Firing a timer only puts a tick on its channel; the code waiting on it
// runs afterwards on its own goroutine. A test that advances the clock
// therefore waits for the effect it expects (a callback, a cancelled
// context) rather than assuming it has happened when Advance returns.
//
// Create a Fake with NewFake; its methods are safe for concurrent use.
type Fake struct {
	mu  sync.Mutex
	now time.Time
	// timers are the armed timers: one that fires or is stopped leaves
	// the list, and Reset puts it back. A member makes a timer per wait,
	// so keeping every timer ever made grew without bound, and each move
	// of the clock scanned them all.
	timers []*fakeTimer
}

// NewFake returns a fake clock that reads start until it is moved.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer implements Clock.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, c: make(chan time.Time, 1), at: f.now.Add(d), armed: true}
	f.timers = append(f.timers, t)
	f.fireLocked()
	return t
}

// Advance moves the clock forward by d and fires every timer that is then
// due, earliest deadline first.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fireLocked()
}

// Set moves the clock to t and fires every timer that is then due. A t
// before the clock's current time leaves the time as it is: a Fake never
// goes backwards.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.now = t
	}
	f.fireLocked()
}

// NextDeadline returns the earliest deadline among the timers that are
// armed (made or reset, and neither fired nor stopped since), and false
// when there is none. A test can Set the clock to it to run the next timed
// step of the code under test, whatever that step's delay is.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var best time.Time
	ok := false
	for _, t := range f.timers {
		if t.armed && (!ok || t.at.Before(best)) {
			best, ok = t.at, true
		}
	}
	return best, ok
}

func (f *Fake) fireLocked() {
	due := f.timers[:0:0]
	armed := f.timers[:0]
	for _, t := range f.timers {
		if !t.at.After(f.now) {
			due = append(due, t)
		} else {
			armed = append(armed, t)
		}
	}
	clear(f.timers[len(armed):])
	f.timers = armed
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.armed = false
		select {
		case t.c <- f.now:
		default:
		}
	}
}

type fakeTimer struct {
	f     *Fake
	c     chan time.Time
	at    time.Time
	armed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Reset(d time.Duration) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	// Drop a stale tick so Reset behaves like Go 1.23+ timers.
	select {
	case <-t.c:
	default:
	}
	t.at = t.f.now.Add(d)
	if !t.armed {
		t.armed = true
		t.f.timers = append(t.f.timers, t)
	}
	t.f.fireLocked()
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.armed
	if was {
		t.armed = false
		t.f.timers = slices.DeleteFunc(t.f.timers, func(o *fakeTimer) bool { return o == t })
	}
	select {
	case <-t.c:
	default:
	}
	return was
}

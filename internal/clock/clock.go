// Package clock abstracts time so that timer-driven code (coordinator loops,
// session timeouts, heartbeats) can be tested deterministically with a fake
// clock that only moves when the test says so.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends on C once d has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is the subset of *time.Timer the project uses.
type Timer interface {
	C() <-chan time.Time
	// Reset re-arms the timer to fire after d. The caller must have stopped
	// or drained it, as with time.Timer (Go 1.23+ semantics make this safe).
	Reset(d time.Duration)
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// Now implements Clock.
func (Real) Now() time.Time { return time.Now() }

// NewTimer implements Clock.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop() bool            { return r.t.Stop() }

// Fake is a manually advanced clock. Its timers fire (send on their channel,
// without blocking) when Advance moves the time past their deadline.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a fake clock reading start.
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

// Advance moves the clock forward by d and fires every timer now due, in
// deadline order.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fireLocked()
}

// Set moves the clock to t (never backwards) and fires due timers.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.now = t
	}
	f.fireLocked()
}

// NextDeadline reports the earliest armed timer deadline, if any.
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
	for _, t := range f.timers {
		if t.armed && !t.at.After(f.now) {
			due = append(due, t)
		}
	}
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
	t.armed = true
	t.f.fireLocked()
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.armed
	t.armed = false
	select {
	case <-t.c:
	default:
	}
	return was
}

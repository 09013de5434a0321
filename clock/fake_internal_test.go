package clock

import (
	"testing"
	"time"
)

// A member makes a timer for each wait (member.Member's loop), so a test
// that runs one on a Fake for many heartbeats makes thousands: the Fake
// keeps only those still armed, not every timer it ever made, which it
// would scan again at each move of the clock.
func TestFakeKeepsOnlyArmedTimers(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	for i := 0; i < 1000; i++ {
		fired := f.NewTimer(time.Second)
		stopped := f.NewTimer(time.Hour)
		stopped.Stop()
		f.Advance(time.Second)
		select {
		case <-fired.C():
		default:
			t.Fatalf("round %d: a timer due did not fire", i)
		}
	}
	if n := len(f.timers); n != 0 {
		t.Fatalf("the fake keeps %d timers, none of them armed; want 0", n)
	}
	// A fired or stopped timer that is reset is armed again, and fires.
	tm := f.NewTimer(time.Second)
	tm.Stop()
	tm.Reset(2 * time.Second)
	f.Advance(time.Second)
	tm.Reset(time.Second)
	if at, ok := f.NextDeadline(); !ok || !at.Equal(f.Now().Add(time.Second)) {
		t.Fatalf("NextDeadline = %v, %v after a reset, want %v", at, ok, f.Now().Add(time.Second))
	}
	f.Advance(time.Second)
	select {
	case <-tm.C():
	default:
		t.Fatal("a reset timer did not fire")
	}
	if n := len(f.timers); n != 0 {
		t.Fatalf("the fake keeps %d timers after the last fired; want 0", n)
	}
}

package election

import (
	"testing"
	"time"

	"github.com/cohort-dev/cohort/clock"
)

// TestTokenEndsAtTheDeadline: Token reads the clock as Lease.Check does. A
// process that resumes from a freeze past its term's deadline has not yet
// run its member's watchdog (the term is still recorded); Token must not
// report it as the writer then, nor once the member holds no work.
func TestTokenEndsAtTheDeadline(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	until := clk.Now().Add(8 * time.Second)
	e := &Election{token: 7, clk: clk, ready: make(chan struct{}), until: func() time.Time { return until }}
	close(e.ready)
	clk.Advance(8*time.Second - time.Nanosecond)
	if got := e.Token(); got != 7 {
		t.Fatalf("1ns before the deadline: token %d, want 7", got)
	}
	clk.Advance(time.Nanosecond) // resumed from a freeze: nothing else ran
	if got := e.Token(); got != -1 {
		t.Fatalf("at the deadline, before the member noticed: token %d, want -1", got)
	}
	until = time.Time{} // the member holds no work; Lost has not run yet
	clk = clock.NewFake(time.Unix(1000, 0))
	e.clk = clk
	if got := e.Token(); got != -1 {
		t.Fatalf("no work held: token %d, want -1", got)
	}
	e.token = -1
	until = clk.Now().Add(time.Hour)
	if got := e.Token(); got != -1 {
		t.Fatalf("not writing: token %d, want -1", got)
	}
}

package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/clock"
)

var (
	errStopped = errors.New("stopped")
	errExpired = errors.New("expired")
)

// A process frozen past its deadline resumes with a live context (no timer
// has run yet) and a clock already past the deadline: Check refuses on the
// clock alone, keeps refusing when the deadline moves afterwards, and a
// cancelled context or a member holding no work refuse too.
func TestCheck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clk := clock.NewFake(t0)
	until := t0.Add(8 * time.Second)
	errs := Errors{Stopped: errStopped, Expired: errExpired, Label: "r@7"}
	l := New(context.Background(), clk, func() time.Time { return until }, errs)
	clk.Advance(8*time.Second - time.Nanosecond)
	if err := l.Check(); err != nil {
		t.Fatalf("before the deadline: %v", err)
	}
	clk.Advance(time.Nanosecond)
	if err := l.Check(); !errors.Is(err, errExpired) || err.Error() != "expired: r@7: 0s past its deadline" {
		t.Fatalf("at the deadline: %v", err)
	}
	until = clk.Now().Add(time.Hour)
	if err := l.Check(); !errors.Is(err, errExpired) {
		t.Fatalf("after the deadline moved: %v", err)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	l = New(ctx, clk, func() time.Time { return until }, errs)
	cause := errors.New("moved away")
	cancel(cause)
	if err := l.Check(); !errors.Is(err, errStopped) || !errors.Is(err, cause) {
		t.Fatalf("cancelled: %v", err)
	}

	l = New(context.Background(), clk, func() time.Time { return time.Time{} }, errs)
	if err := l.Check(); !errors.Is(err, errExpired) {
		t.Fatalf("no work held: %v", err)
	}
}

// TestDeadlineMovedDuringCheck: the member confirms a heartbeat in time, and
// moves its deadline on, while a Check is between reading the deadline and
// reading the clock, and the clock crosses the old deadline meanwhile. The
// member keeps its membership (the answer came before the deadline), so the
// lease must not refuse: a refusal is final, and work that stops on it would
// stay announced as held. Check compares the clock with a deadline read after
// it, which the member can only have moved for an answer that came in time.
func TestDeadlineMovedDuringCheck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clk := clock.NewFake(t0)
	old, moved := t0.Add(8*time.Second), t0.Add(9*time.Second)
	clk.Advance(8*time.Second - time.Millisecond)
	reads := 0
	until := func() time.Time {
		reads++
		if reads > 1 {
			return moved
		}
		// This read sees the old deadline; right after it the member
		// takes the heartbeat answer (at t0+8s-1ms) and 1ms passes.
		defer clk.Advance(time.Millisecond)
		return old
	}
	l := New(context.Background(), clk, until, Errors{Stopped: errStopped, Expired: errExpired, Label: "r@7"})
	if err := l.Check(); err != nil {
		t.Fatalf("refused although the deadline was moved in time: %v", err)
	}
}

package workers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/clock"
)

var t0 = time.Unix(1000, 0)

// A process frozen past its deadline resumes with a live context (the
// member's watchdog has not run yet) and a clock already past the deadline:
// Check refuses on the clock alone, and keeps refusing even if the deadline
// moves afterwards.
func TestLeaseExpiresOnTheClockBeforeAnyTimer(t *testing.T) {
	clk := clock.NewFake(t0)
	until := t0.Add(8 * time.Second)
	ctx, l := newLease(context.Background(), Token{Resource: "r1", Generation: 7}, clk, func() time.Time { return until })
	if LeaseOf(ctx) != l {
		t.Fatal("LeaseOf does not return the lease")
	}
	if err := l.Check(); err != nil {
		t.Fatalf("fresh lease: %v", err)
	}
	clk.Advance(8*time.Second - time.Nanosecond)
	if !l.Valid() {
		t.Fatal("lease refused before its deadline")
	}
	clk.Advance(time.Nanosecond)
	err := l.Check()
	if !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("at the deadline: %v, want ErrLeaseExpired", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the context was cancelled: the test must show the clock alone refuses")
	}
	// A heartbeat confirmed after the fact does not revive the lease.
	until = clk.Now().Add(8 * time.Second)
	if l.Valid() {
		t.Fatal("an expired lease became valid again")
	}
	if got := l.Token(); got != (Token{Resource: "r1", Generation: 7}) || got.String() != "r1@7" {
		t.Fatalf("token %v", got)
	}
}

// Confirmed heartbeats move the deadline; the lease stays valid as long as
// the clock stays before it.
func TestLeaseFollowsTheDeadline(t *testing.T) {
	clk := clock.NewFake(t0)
	until := t0.Add(8 * time.Second)
	_, l := newLease(context.Background(), Token{Resource: "r", Generation: 1}, clk, func() time.Time { return until })
	for range 20 {
		clk.Advance(time.Second)
		until = clk.Now().Add(8 * time.Second) // a heartbeat sent now was confirmed
		if err := l.Check(); err != nil {
			t.Fatalf("at %v: %v", clk.Now().Sub(t0), err)
		}
		if !l.Deadline().Equal(until) {
			t.Fatalf("Deadline %v, want %v", l.Deadline(), until)
		}
	}
	clk.Advance(8 * time.Second)
	if !errors.Is(l.Check(), ErrLeaseExpired) {
		t.Fatal("no heartbeat for the whole deadline, lease still valid")
	}
}

// A cancelled context refuses with its cause; so does a member holding no
// work (zero deadline), and a context without a lease.
func TestLeaseStoppedAndMissing(t *testing.T) {
	clk := clock.NewFake(t0)
	cause := errors.New("moved")
	ctx, cancel := context.WithCancelCause(context.Background())
	_, l := newLease(ctx, Token{Resource: "r", Generation: 3}, clk, func() time.Time { return t0.Add(time.Hour) })
	cancel(cause)
	if err := l.Check(); !errors.Is(err, ErrStopped) || !errors.Is(err, cause) {
		t.Fatalf("cancelled: %v", err)
	}
	_, l = newLease(context.Background(), Token{Resource: "r", Generation: 3}, clk, func() time.Time { return time.Time{} })
	if err := l.Check(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("zero deadline: %v", err)
	}
	var none *Lease = LeaseOf(context.Background())
	if none != nil || !errors.Is(none.Check(), ErrNoLease) || none.Token().Generation != -1 || !none.Deadline().IsZero() {
		t.Fatal("a context without a lease")
	}
}

func TestFencePerResource(t *testing.T) {
	var f Fence
	if f.Highest("a") != -1 {
		t.Fatal("empty fence")
	}
	writes := 0
	write := func() error { writes++; return nil }
	for _, tc := range []struct {
		tok   Token
		stale bool
	}{
		{Token{"a", 5}, false},
		{Token{"b", 2}, false}, // another resource has its own history
		{Token{"a", 5}, false}, // the same owner again
		{Token{"a", 7}, false},
		{Token{"a", 5}, true}, // the former owner, resumed
		{Token{"b", 2}, false},
		{Token{"b", 1}, true},
	} {
		err := f.Do(tc.tok, write)
		var se *StaleTokenError
		if got := errors.As(err, &se); got != tc.stale {
			t.Fatalf("%v: err %v, want stale %v", tc.tok, err, tc.stale)
		}
		if tc.stale && (se.Token != tc.tok || se.Highest != f.Highest(tc.tok.Resource)) {
			t.Fatalf("%v: %+v", tc.tok, se)
		}
	}
	if writes != 5 || f.Highest("a") != 7 || f.Highest("b") != 2 {
		t.Fatalf("writes %d, highest a=%d b=%d", writes, f.Highest("a"), f.Highest("b"))
	}
	if err := f.Admit(Token{"a", 6}); err == nil {
		t.Fatal("Admit let a stale token through")
	}
}

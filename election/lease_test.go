package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/election"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
)

// TestWriterLeaseIsTheMembersDeadline: the writer's lease ends where the
// member's own loss detection does (session timeout less LostMargin after the
// send time of the last confirmed heartbeat), moves with each confirmed
// heartbeat, and refuses on the clock at the deadline — before the member's
// watchdog has cancelled Func's context, as in a process that resumes after
// a freeze. The coordinator is real; the member's clock is fake and only the
// test moves it.
func TestWriterLeaseIsTheMembersDeadline(t *testing.T) {
	addr := membertest.StartCohort(t, nil).Addr()
	clk := clock.NewFake(time.Unix(1000, 0))
	t0 := clk.Now()
	const sessionT, margin = 10 * time.Second, 2 * time.Second
	f := &membertest.Filter{R: membertest.Client(t, addr)}
	type term struct {
		lease *election.Lease
		token int32
		ctx   context.Context
	}
	terms := make(chan term, 1)
	stopped := make(chan struct{})
	var calls atomic.Int32
	e, err := election.Start(election.Config{Member: member.Config{
		Client: f, Group: "writer-lease", Clock: clk, Logger: membertest.Logger(t),
		SessionTimeout: sessionT, RebalanceTimeout: sessionT, HeartbeatInterval: time.Second, LostMargin: margin,
	}}, func(ctx context.Context, token int32) {
		// Only the first term is the test's: after it is lost the member
		// rejoins (only heartbeats are blocked) and may be the writer
		// again under a new token until the test ends.
		first := calls.Add(1) == 1
		if first {
			terms <- term{election.LeaseOf(ctx), token, ctx}
		}
		<-ctx.Done()
		if first {
			close(stopped)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Abandon)
	var w term
	select {
	case w = <-terms:
	case <-time.After(10 * time.Second):
		t.Fatal("no term started")
	}
	l := w.lease
	if l == nil || l.Token() != w.token || w.token != e.Token() {
		t.Fatalf("lease %v for token %d (election says %d)", l, w.token, e.Token())
	}
	deadline := func(want time.Time) func() bool {
		return func() bool { return l.Deadline().Equal(want) }
	}
	// Joined and synced at t0 on the member's clock.
	testwait.For(t, 10*time.Second, "deadline t0+8s", deadline(t0.Add(sessionT-margin)))
	// The heartbeat sent at t0+1s is confirmed: the deadline moves by 1s.
	clk.Advance(time.Second)
	testwait.For(t, 10*time.Second, "deadline t0+9s", deadline(t0.Add(time.Second+sessionT-margin)))

	// From now on heartbeats are lost: the deadline stays at t0+9s. The
	// clock jumps to it in one step, as it does for a process resumed from
	// a freeze: Check refuses at once, on the clock alone.
	f.SetBlock(membertest.Heartbeats)
	clk.Advance(8*time.Second - time.Nanosecond)
	if err := l.Check(); err != nil {
		t.Fatalf("refused 1ns before its deadline: %v", err)
	}
	clk.Advance(time.Nanosecond)
	err = l.Check()
	if !errors.Is(err, election.ErrLeaseExpired) && !errors.Is(err, election.ErrStopped) {
		t.Fatalf("at the deadline: %v", err)
	}
	if l.Valid() {
		t.Fatal("a failed lease became valid again")
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer's Func was not stopped after its deadline")
	}
	if err := election.LeaseOf(context.Background()).Check(); !errors.Is(err, election.ErrNoLease) {
		t.Fatalf("a context without a lease: %v", err)
	}
}

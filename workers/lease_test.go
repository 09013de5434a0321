package workers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
	"github.com/cohort-dev/cohort/workers"
)

// TestPoolLeaseIsTheMembersDeadline: a resource's lease ends where the
// member's own loss detection does (session timeout less LostMargin after the
// send time of the last confirmed heartbeat), moves with each confirmed
// heartbeat, and refuses on the fake clock at the deadline. The coordinator
// is real; the member's clock is fake and only the test moves it.
func TestPoolLeaseIsTheMembersDeadline(t *testing.T) {
	addr := membertest.StartCohort(t, nil).Addr()
	clk := clock.NewFake(time.Unix(1000, 0))
	t0 := clk.Now()
	const sessionT, margin = 10 * time.Second, 2 * time.Second
	f := &membertest.Filter{R: membertest.Client(t, addr)}
	type started struct {
		lease *workers.Lease
		token int32
	}
	starts := make(chan started, 3)
	stops := make(chan string, 3)
	p, err := workers.Start(workers.Config{
		Member: member.Config{
			Client: f, Group: "lease-deadline", Clock: clk, Logger: membertest.Logger(t),
			SessionTimeout: sessionT, RebalanceTimeout: sessionT, HeartbeatInterval: time.Second, LostMargin: margin,
		},
		Resources: func(context.Context) ([]workers.Resource, error) { return unitResources(3), nil },
		// Only the first term is the test's: after it is lost the member
		// rejoins (only heartbeats are blocked) and may run the resources
		// again until the test ends; what the channels cannot hold is
		// dropped rather than block the pool's callbacks.
		Start: func(ctx context.Context, _ string, token int32) {
			select {
			case starts <- started{workers.LeaseOf(ctx), token}:
			default:
			}
		},
		Stop: func(n string) {
			select {
			case stops <- n:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Abandon)
	var leases []*workers.Lease
	for range 3 {
		select {
		case s := <-starts:
			if s.lease == nil || s.lease.Token().Generation != s.token {
				t.Fatalf("lease %v for token %d", s.lease.Token(), s.token)
			}
			leases = append(leases, s.lease)
		case <-time.After(10 * time.Second):
			t.Fatal("resources not started")
		}
	}
	deadlines := func(want time.Time) func() bool {
		return func() bool {
			for _, l := range leases {
				if !l.Deadline().Equal(want) {
					return false
				}
			}
			return true
		}
	}
	// Joined and synced at t0 on the member's clock.
	waitReal(t, "deadline t0+8s", deadlines(t0.Add(sessionT-margin)))
	// The heartbeat sent at t0+1s is confirmed: the deadline moves by 1s.
	clk.Advance(time.Second)
	waitReal(t, "deadline t0+9s", deadlines(t0.Add(time.Second+sessionT-margin)))

	// From now on heartbeats are lost: the deadline stays at t0+9s.
	f.SetBlock(membertest.Heartbeats)
	clk.Advance(8*time.Second - time.Nanosecond)
	for _, l := range leases {
		if err := l.Check(); err != nil {
			t.Fatalf("%v refused 1ns before its deadline: %v", l.Token(), err)
		}
	}
	clk.Advance(time.Nanosecond)
	for _, l := range leases {
		// Refused on the clock, whether or not the member has already
		// cancelled the context.
		if err := l.Check(); !errors.Is(err, workers.ErrLeaseExpired) && !errors.Is(err, workers.ErrStopped) {
			t.Fatalf("%v at its deadline: %v", l.Token(), err)
		}
	}
	for range 3 {
		select {
		case <-stops:
		case <-time.After(10 * time.Second):
			t.Fatal("the member did not stop its resources after its deadline")
		}
	}
}

// waitReal polls cond on the wall clock (bounded): the member's goroutines
// handle a heartbeat's answer after the fake clock moved.
func waitReal(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

package election_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/election"
	"github.com/cohort-dev/cohort/member"
)

// A test of a program's writer runs the candidate on a fake clock, so that
// it can cut the writer off from its coordinator and see the term end at
// the deadline, to the nanosecond, without waiting for it in real time.
// Only the member's own timers use the fake clock; the coordinator here is
// a real node.
func ExampleStart_fakeClock() {
	n := startExampleNode()

	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	began := make(chan *election.Lease)
	ended := make(chan error)
	e, err := election.Start(election.Config{Member: member.Config{
		Brokers: []string{n.Addr()}, Group: "example-fake-clock",
		SessionTimeout: 10 * time.Second, // LostMargin defaults to a fifth: 2s
		Clock:          fake,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}}, func(ctx context.Context, token int32) {
		began <- election.LeaseOf(ctx)
		<-ctx.Done()
		ended <- context.Cause(ctx)
	})
	if err != nil {
		panic(err)
	}
	l := <-began
	fmt.Printf("writer with token %d until start+%v\n", l.Token(), l.Deadline().Sub(start))

	// The coordinator goes away: no heartbeat will be confirmed again.
	n.Close()
	fake.Set(l.Deadline().Add(-time.Millisecond))
	fmt.Println("a millisecond before:", l.Check())
	fake.Set(l.Deadline())
	// From here Check refuses: the deadline has passed (ErrLeaseExpired),
	// or the member has already ended the term (ErrStopped).
	fmt.Println("at the deadline, refused:", l.Check() != nil)
	fmt.Println("term ended:", errors.Is(<-ended, member.ErrSessionLost))

	e.Abandon()
	// Output:
	// writer with token 1 until start+8s
	// a millisecond before: <nil>
	// at the deadline, refused: true
	// term ended: true
}

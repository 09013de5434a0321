package member

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/clock"
)

// fakeCoordinator answers a single member's requests in memory: the
// MEMBER_ID_REQUIRED round trip, generation 1 with the member as leader, and
// heartbeats that succeed or fail on demand. It records the fake time of
// every heartbeat.
type fakeCoordinator struct {
	clk *clock.Fake
	mu  sync.Mutex
	// failHB makes heartbeats fail as a network error would.
	failHB bool
	// rebalance makes heartbeats answer REBALANCE_IN_PROGRESS.
	rebalance bool
	gen       int32
	hbs       chan time.Time
}

func (f *fakeCoordinator) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		if r.MemberID == "" {
			resp.ErrorCode = kerr.MemberIDRequired.Code
			resp.MemberID = "m1"
			return resp, nil
		}
		f.gen++
		f.rebalance = false
		p := r.Protocols[0].Name
		resp.Generation, resp.Protocol, resp.LeaderID, resp.MemberID = f.gen, &p, r.MemberID, r.MemberID
		resp.Members = []kmsg.JoinGroupResponseMember{{MemberID: r.MemberID, ProtocolMetadata: r.Protocols[0].Metadata}}
		return resp, nil
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		for _, a := range r.GroupAssignment {
			if a.MemberID == r.MemberID {
				resp.MemberAssignment = a.MemberAssignment
			}
		}
		return resp, nil
	case *kmsg.HeartbeatRequest:
		f.hbs <- f.clk.Now()
		if f.failHB {
			return nil, errors.New("network down")
		}
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		if f.rebalance {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
		}
		return resp, nil
	case *kmsg.LeaveGroupRequest:
		return r.ResponseKind(), nil
	}
	return nil, errors.New("unexpected request")
}

func (f *fakeCoordinator) set(fn func()) {
	f.mu.Lock()
	fn()
	f.mu.Unlock()
}

type clockEvent struct {
	kind string
	at   time.Time
	err  error
	ctx  context.Context
}

func startFake(t *testing.T, cooperative bool) (*Member, *fakeCoordinator, *clock.Fake, chan clockEvent) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1000, 0))
	fc := &fakeCoordinator{clk: clk, hbs: make(chan time.Time, 100)}
	ev := make(chan clockEvent, 100)
	m, err := Start(Config{
		Client:       fc,
		Group:        "g",
		ProtocolType: "test",
		Protocols:    func() []Protocol { return []Protocol{{Name: "p", Metadata: []byte("x")}} },
		Assign: func(_ context.Context, g Generation) (map[string][]byte, error) {
			return map[string][]byte{g.MemberID: []byte("a")}, nil
		},
		Assigned:          func(ctx context.Context, g Generation) { ev <- clockEvent{kind: "assigned", at: clk.Now(), ctx: ctx} },
		Revoked:           func(g Generation) { ev <- clockEvent{kind: "revoked", at: clk.Now()} },
		Lost:              func(g Generation, err error) { ev <- clockEvent{kind: "lost", at: clk.Now(), err: err} },
		Cooperative:       cooperative,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  30 * time.Second,
		HeartbeatInterval: time.Second,
		LostMargin:        2 * time.Second,
		Clock:             clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Abandon)
	return m, fc, clk, ev
}

func waitEvent(t *testing.T, ev chan clockEvent, kind string) clockEvent {
	t.Helper()
	select {
	case e := <-ev:
		if e.kind != kind {
			t.Fatalf("got %s (%v), want %s", e.kind, e.err, kind)
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s event", kind)
	}
	panic("unreachable")
}

// waitFor polls cond (bounded) — used to wait for the member's goroutines to
// settle between fake clock steps.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHeartbeatScheduleAndLostDeadline checks on a fake clock that
// heartbeats go out every interval and that the member declares itself lost
// exactly at (send time of the last confirmed heartbeat) + session - margin.
func TestHeartbeatScheduleAndLostDeadline(t *testing.T) {
	m, fc, clk, ev := startFake(t, false)
	t0 := clk.Now()
	a := waitEvent(t, ev, "assigned")

	for k := 1; k <= 3; k++ {
		waitFor(t, "heartbeat timer armed", func() bool {
			d, ok := clk.NextDeadline()
			return ok && d.Equal(t0.Add(time.Duration(k)*time.Second))
		})
		clk.Advance(time.Second)
		if at := recvHB(t, fc); !at.Equal(t0.Add(time.Duration(k) * time.Second)) {
			t.Fatalf("heartbeat %d at %v, want t0+%ds", k, at.Sub(t0), k)
		}
	}
	lastOK := t0.Add(3 * time.Second)
	waitFor(t, "heartbeat confirmed", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.aliveUntil.Equal(lastOK.Add(10 * time.Second))
	})

	fc.set(func() { fc.failHB = true })
	deadline := lastOK.Add(10*time.Second - 2*time.Second)
	clk.Set(deadline.Add(-time.Millisecond))
	select {
	case e := <-ev:
		t.Fatalf("%s at t0+%v, before the deadline", e.kind, e.at.Sub(t0))
	case <-time.After(100 * time.Millisecond):
	}
	if a.ctx.Err() != nil {
		t.Fatal("work cancelled before the deadline")
	}
	clk.Set(deadline)
	lost := waitEvent(t, ev, "lost")
	if !lost.at.Equal(deadline) || !errors.Is(lost.err, ErrSessionLost) {
		t.Fatalf("lost at t0+%v with %v, want t0+%v", lost.at.Sub(t0), lost.err, deadline.Sub(t0))
	}
	if !errors.Is(context.Cause(a.ctx), ErrSessionLost) {
		t.Fatalf("work context cause %v", context.Cause(a.ctx))
	}

	// The coordinator answers again: the member rejoins and is assigned.
	fc.set(func() { fc.failHB = false })
	waitEvent(t, ev, "assigned")
}

// TestEagerRevokeBeforeRejoin: REBALANCE_IN_PROGRESS cancels the work
// context, calls Revoked, and only then rejoins (generation 2).
func TestEagerRevokeBeforeRejoin(t *testing.T) {
	_, fc, clk, ev := startFake(t, false)
	a := waitEvent(t, ev, "assigned")
	fc.set(func() { fc.rebalance = true })
	nextHeartbeat(t, clk)
	waitEvent(t, ev, "revoked")
	if !errors.Is(context.Cause(a.ctx), ErrRevoked) {
		t.Fatalf("cause %v", context.Cause(a.ctx))
	}
	b := waitEvent(t, ev, "assigned")
	if b.ctx == a.ctx || b.ctx.Err() != nil {
		t.Fatal("eager generation reused the revoked context")
	}
	fc.set(func() {
		if fc.gen != 2 {
			t.Errorf("generation %d, want 2", fc.gen)
		}
	})
}

// TestCooperativeKeepsContext: in cooperative mode a rebalance neither
// revokes nor cancels the work context.
func TestCooperativeKeepsContext(t *testing.T) {
	_, fc, clk, ev := startFake(t, true)
	a := waitEvent(t, ev, "assigned")
	fc.set(func() { fc.rebalance = true })
	nextHeartbeat(t, clk)
	b := waitEvent(t, ev, "assigned")
	if b.ctx != a.ctx || a.ctx.Err() != nil {
		t.Fatal("cooperative rebalance cancelled the work context")
	}
}

// TestCooperativeRejoinDeadline: a cooperative member that detects a
// rebalance but cannot rejoin (its main loop is stuck in a callback) stops its
// work by the rebalance timeout, measured from the last confirmed heartbeat
// before the rebalance, less the margin.
func TestCooperativeRejoinDeadline(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	fc := &fakeCoordinator{clk: clk, hbs: make(chan time.Time, 100)}
	release := make(chan struct{})
	var first sync.Once
	lost := make(chan time.Time, 1)
	var work context.Context
	m, err := Start(Config{
		Client:       fc,
		Group:        "g",
		ProtocolType: "test",
		Protocols:    func() []Protocol { return []Protocol{{Name: "p"}} },
		Assign:       func(_ context.Context, g Generation) (map[string][]byte, error) { return nil, nil },
		Assigned: func(ctx context.Context, g Generation) {
			first.Do(func() {
				work = ctx
				context.AfterFunc(ctx, func() { lost <- clk.Now() })
				<-release // a slow callback blocks the main loop
			})
		},
		Cooperative:       true,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  4 * time.Second,
		HeartbeatInterval: time.Second,
		LostMargin:        time.Second,
		Clock:             clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(release); m.Abandon() }()
	t0 := clk.Now()
	waitFor(t, "assigned", func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.stable })
	nextHeartbeat(t, clk) // heartbeat OK at t0+1
	recvHB(t, fc)
	waitFor(t, "heartbeat confirmed", func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.lastOK.Equal(t0.Add(time.Second)) })
	fc.set(func() { fc.rebalance = true })
	for k := 2; k <= 3; k++ { // REBALANCE_IN_PROGRESS keeps the session alive
		nextHeartbeat(t, clk)
		recvHB(t, fc)
	}
	nextHeartbeat(t, clk) // t0+4
	// limit = lastOK + rebalance timeout - margin = t0+1+4-1 = t0+4.
	select {
	case at := <-lost:
		if !at.Equal(t0.Add(4 * time.Second)) {
			t.Fatalf("work stopped at t0+%v, want t0+4s", at.Sub(t0))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("work not stopped at the rebalance deadline")
	}
	if !errors.Is(context.Cause(work), ErrSessionLost) {
		t.Fatalf("cause %v", context.Cause(work))
	}
}

// nextHeartbeat waits until the heartbeat timer (the earliest timer) is armed
// for one interval (1s) ahead and moves the clock there.
func nextHeartbeat(t *testing.T, clk *clock.Fake) {
	t.Helper()
	want := clk.Now().Add(time.Second)
	waitFor(t, "heartbeat timer", func() bool { d, ok := clk.NextDeadline(); return ok && d.Equal(want) })
	clk.Set(want)
}

func recvHB(t *testing.T, fc *fakeCoordinator) time.Time {
	t.Helper()
	select {
	case at := <-fc.hbs:
		return at
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat")
	}
	panic("unreachable")
}

package member

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/clock"
)

// Tests of Close during a rebalance with Config.FinishRebalanceOnClose: a
// cooperative member holding its work lets the join or sync under way
// complete, and revokes in the new generation (the coordinator refuses
// commits while it waits for the leader's assignment).

func finishOnClose(c *Config) { c.FinishRebalanceOnClose = true }

// rebalancing brings a cooperative member, stable in generation 1 (led by
// leader), into generation 2's rebalance: its JoinGroup is answered and
// its SyncGroup (or, leading, its Assign) is under way.
func (h *hand) rebalancing(leader string) {
	h.t.Helper()
	h.joinStable(1, leader)
	h.tickTo(h.now.Add(time.Second))
	h.answerHB(kerr.RebalanceInProgress.Code)
	h.step(h.take(JoinGroup), joinAnswer(2, "m1", leader, 0), nil)
}

// leaves checks that the member revokes its work in generation gen (work
// cancelled with ErrClosed, Revoked, never Assigned), then sends LeaveGroup
// and stops.
func (h *hand) leaves(gen int32) {
	h.t.Helper()
	if len(h.cnl) != 1 || !errors.Is(h.cnl[0].Cause, ErrClosed) {
		h.t.Fatalf("cancels %v, want the work cancelled with ErrClosed", h.cnl)
	}
	if c, ok := h.callback(CallAssigned); ok {
		h.t.Fatalf("Assigned generation %d while closing", c.Gen.ID)
	}
	r := h.mustCallback(CallRevoked)
	if r.Gen.ID != gen || r.Gen.MemberID != "m1" {
		h.t.Fatalf("Revoked in generation %d member %q, want %d m1", r.Gen.ID, r.Gen.MemberID, gen)
	}
	if h.has(LeaveGroup) {
		h.t.Fatal("LeaveGroup before Revoked returned")
	}
	h.done(r, nil, nil)
	h.step(h.take(LeaveGroup), kmsg.NewPtrLeaveGroupResponse(), nil)
	if !h.m.Done() || h.has(JoinGroup) || h.has(SyncGroup) {
		h.t.Fatalf("Done %v, JoinGroup %v, SyncGroup %v after the LeaveGroup", h.m.Done(), h.has(JoinGroup), h.has(SyncGroup))
	}
}

// waiting checks that a closed member still waits for its rebalance.
func (h *hand) waiting() {
	h.t.Helper()
	if len(h.cnl) != 0 || len(h.cbs) != 0 || h.has(LeaveGroup) || h.m.Done() {
		h.t.Fatalf("closing member did not wait for the rebalance: cancels %v, callbacks %v, LeaveGroup %v, Done %v",
			h.cnl, h.cbs, h.has(LeaveGroup), h.m.Done())
	}
}

// TestCloseFinishesSync: closed while its SyncGroup waits for the leader's
// assignment, the member keeps the sync, and once it is answered revokes
// its work in generation 2 and leaves.
func TestCloseFinishesSync(t *testing.T) {
	h := newHand(t, true, finishOnClose)
	h.rebalancing("m0")
	sq := h.take(SyncGroup)
	h.m.Close(h.now)
	h.collect()
	h.waiting()
	for range 3 { // heartbeats go on meanwhile
		h.tickTo(h.now.Add(time.Second))
		h.answerHB(0)
	}
	h.waiting()
	h.step(sq, syncAnswer(0, []byte("b")), nil)
	h.leaves(2)
}

// TestCloseFinishesAssign: a leader closed while its Assign runs still
// syncs the assignment it made, then revokes in generation 2 and leaves.
func TestCloseFinishesAssign(t *testing.T) {
	h := newHand(t, true, finishOnClose)
	h.rebalancing("m1")
	a := h.mustCallback(CallAssign)
	h.m.Close(h.now)
	h.collect()
	if len(h.cnl) != 0 || h.has(LeaveGroup) {
		t.Fatalf("cancels %v, LeaveGroup %v while Assign runs", h.cnl, h.has(LeaveGroup))
	}
	h.done(a, map[string][]byte{"m1": []byte("b")}, nil)
	sq := h.take(SyncGroup)
	if sr := sq.Req.(*kmsg.SyncGroupRequest); sr.Generation != 2 || len(sr.GroupAssignment) != 1 {
		t.Fatalf("SyncGroup generation %d with %d assignments, want 2 with 1", sr.Generation, len(sr.GroupAssignment))
	}
	h.waiting()
	h.step(sq, syncAnswer(0, []byte("b")), nil)
	h.leaves(2)
}

// TestCloseFinishesJoin: closed while its JoinGroup is parked, the member
// keeps the join and then the sync, and sends no other join.
func TestCloseFinishesJoin(t *testing.T) {
	h := newHand(t, true, finishOnClose)
	h.joinStable(1, "m0")
	h.tickTo(h.now.Add(time.Second))
	h.answerHB(kerr.RebalanceInProgress.Code)
	q := h.take(JoinGroup)
	h.m.Close(h.now)
	h.collect()
	h.waiting()
	h.step(q, joinAnswer(2, "m1", "m0", 0), nil)
	h.waiting()
	h.step(h.take(SyncGroup), syncAnswer(0, []byte("b")), nil)
	h.leaves(2)
}

// TestCloseNowEndsRebalanceWait: CloseNow (Close's time ran out) abandons
// the sync: the member revokes in the generation it has and leaves, and a
// late answer changes nothing.
func TestCloseNowEndsRebalanceWait(t *testing.T) {
	h := newHand(t, true, finishOnClose)
	h.rebalancing("m0")
	sq := h.take(SyncGroup)
	h.m.Close(h.now)
	h.collect()
	h.waiting()
	h.tickTo(h.now.Add(time.Second))
	h.answerHB(0)
	h.m.CloseNow(h.now)
	h.collect()
	h.step(sq, syncAnswer(0, []byte("b")), nil) // late
	h.leaves(2)
}

// TestCloseWaitEndsOnFailedSync: a sync that fails (another rebalance)
// ends the wait: no new join, the member revokes in the generation it
// joined and leaves.
func TestCloseWaitEndsOnFailedSync(t *testing.T) {
	h := newHand(t, true, finishOnClose)
	h.rebalancing("m0")
	sq := h.take(SyncGroup)
	h.m.Close(h.now)
	h.collect()
	h.step(sq, syncAnswer(kerr.RebalanceInProgress.Code, nil), nil)
	h.leaves(2)
}

// TestCloseWaitLost: the watchdog still runs while the member waits; once
// the work is lost, the member calls Lost instead of Revoked and leaves.
func TestCloseWaitLost(t *testing.T) {
	h := newHand(t, true, finishOnClose)
	h.rebalancing("m0")
	t1 := h.now
	h.take(SyncGroup) // never answered
	h.m.Close(h.now)
	h.collect()
	for len(h.cnl) == 0 && h.now.Before(t1.Add(60*time.Second)) {
		h.answerHB(0)
		h.tickTo(h.deadline)
	}
	if len(h.cnl) != 1 || !errors.Is(h.cnl[0].Cause, ErrSessionLost) || h.now.After(t1.Add(30*time.Second)) {
		t.Fatalf("cancels %v at t1+%v, want the work lost before the rebalance timeout", h.cnl, h.now.Sub(t1))
	}
	h.done(h.mustCallback(CallLost), nil, nil)
	if _, ok := h.callback(CallRevoked); ok {
		t.Fatal("Revoked after Lost")
	}
	h.step(h.take(LeaveGroup), kmsg.NewPtrLeaveGroupResponse(), nil)
	if !h.m.Done() {
		t.Fatal("not done after the LeaveGroup")
	}
}

// TestCloseWithoutFinishAbandonsSync: without the option (election,
// workers), or for an eager member (which holds no work while rebalancing),
// Close abandons the rebalance at once, as before.
func TestCloseWithoutFinishAbandonsSync(t *testing.T) {
	t.Run("cooperative", func(t *testing.T) {
		h := newHand(t, true, nil)
		h.rebalancing("m0")
		sq := h.take(SyncGroup)
		h.m.Close(h.now)
		h.collect()
		h.step(sq, syncAnswer(0, []byte("b")), nil)
		h.leaves(2)
	})
	t.Run("eager", func(t *testing.T) {
		h := newHand(t, false, finishOnClose)
		h.joinStable(1, "m0")
		h.tickTo(h.now.Add(time.Second))
		h.answerHB(kerr.RebalanceInProgress.Code)
		h.done(h.mustCallback(CallRevoked), nil, nil)
		q := h.take(JoinGroup)
		h.m.Close(h.now)
		h.collect()
		h.step(h.take(LeaveGroup), kmsg.NewPtrLeaveGroupResponse(), nil)
		if !h.m.Done() {
			t.Fatal("eager member waited for its join")
		}
		h.step(q, joinAnswer(2, "m1", "m0", 0), nil)
		if h.has(SyncGroup) {
			t.Fatal("SyncGroup after Close")
		}
	})
}

// parkingCoordinator answers a single cooperative member (MEMBER_ID_REQUIRED
// round trip, a new generation led by "m0" on each join) and parks the
// SyncGroup of generation 2 until release is closed or the request's
// context ends.
type parkingCoordinator struct {
	mu      sync.Mutex
	gen     int32
	parked  chan struct{} // closed when generation 2's SyncGroup arrived
	release chan struct{}
	aborted chan struct{} // closed when the parked SyncGroup's context ended
}

func (f *parkingCoordinator) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		if r.MemberID == "" {
			resp.ErrorCode, resp.MemberID = kerr.MemberIDRequired.Code, "m1"
			return resp, nil
		}
		f.mu.Lock()
		f.gen++
		resp.Generation = f.gen
		f.mu.Unlock()
		p := r.Protocols[0].Name
		resp.Protocol, resp.LeaderID, resp.MemberID = &p, "m0", r.MemberID
		return resp, nil
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.MemberAssignment = []byte{byte(r.Generation)}
		if r.Generation == 2 {
			close(f.parked)
			select {
			case <-f.release:
			case <-ctx.Done():
				close(f.aborted)
				return nil, ctx.Err()
			}
		}
		return resp, nil
	case *kmsg.HeartbeatRequest:
		return r.ResponseKind(), nil
	case *kmsg.LeaveGroupRequest:
		return r.ResponseKind(), nil
	}
	return nil, errors.New("unexpected request")
}

// signal is a slog handler that closes ch at the first record with msg.
type signal struct {
	msg  string
	ch   chan struct{}
	once *sync.Once
}

func (s signal) Enabled(context.Context, slog.Level) bool { return true }
func (s signal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == s.msg {
		s.once.Do(func() { close(s.ch) })
	}
	return nil
}
func (s signal) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s signal) WithGroup(string) slog.Handler      { return s }

// TestMemberCloseFinishesSync: Member.Close with FinishRebalanceOnClose does
// not abort a SyncGroup under way: once answered, Revoked is called with
// the new generation (Assigned is not), and Close returns after the
// LeaveGroup. When Close's context ends first, the sync is aborted and the
// member revokes in the generation it has, as without the option. The fake
// clock never moves: nothing here depends on time.
func TestMemberCloseFinishesSync(t *testing.T) {
	for _, name := range []string{"answered", "context-ends"} {
		t.Run(name, func(t *testing.T) {
			fc := &parkingCoordinator{parked: make(chan struct{}), release: make(chan struct{}), aborted: make(chan struct{})}
			waiting := signal{msg: "closing once the rebalance under way completes", ch: make(chan struct{}), once: new(sync.Once)}
			assigned := make(chan Generation, 4)
			revoked := make(chan Generation, 4)
			m, err := Start(Config{
				Client: fc, Group: "g", ProtocolType: "test",
				Protocols:   func() []Protocol { return []Protocol{{Name: "p"}} },
				Assign:      func(context.Context, Generation) (map[string][]byte, error) { return nil, nil },
				Assigned:    func(_ context.Context, g Generation) { assigned <- g },
				Revoked:     func(g Generation) { revoked <- g },
				Cooperative: true, FinishRebalanceOnClose: true,
				Clock:  clock.NewFake(time.Unix(1000, 0)),
				Logger: slog.New(waiting),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Abandon()
			if g := <-assigned; g.ID != 1 {
				t.Fatalf("Assigned generation %d, want 1", g.ID)
			}
			m.Rejoin()
			<-fc.parked
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			closed := make(chan error, 1)
			go func() { closed <- m.Close(ctx) }()
			select {
			case <-waiting.ch:
			case g := <-revoked:
				t.Fatalf("Revoked generation %d while the sync is under way", g.ID)
			case err := <-closed:
				t.Fatalf("Close returned %v while the sync is under way", err)
			}
			want := error(nil)
			if name == "answered" {
				close(fc.release)
			} else {
				cancel()
				want = context.Canceled
				<-fc.aborted
			}
			if g := <-revoked; g.ID != 2 || g.MemberID != "m1" {
				t.Fatalf("Revoked generation %d member %q, want 2 m1", g.ID, g.MemberID)
			}
			if err := <-closed; !errors.Is(err, want) {
				t.Fatalf("Close: %v, want %v", err, want)
			}
			<-m.Done()
			select {
			case g := <-assigned:
				t.Fatalf("Assigned generation %d while closing", g.ID)
			default:
			}
		})
	}
}

// TestRebalanceWait: Close's wait for a rebalance takes half the time its
// context has left, or all of it without a deadline.
func TestRebalanceWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	w, wcancel := rebalanceWait(ctx)
	defer wcancel()
	d, ok := w.Deadline()
	if half := time.Now().Add(30 * time.Minute); !ok || d.After(half) || d.Before(half.Add(-time.Minute)) {
		t.Fatalf("wait deadline %v (%v), want about half an hour from now", d, ok)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	w2, wcancel2 := rebalanceWait(ctx2)
	defer wcancel2()
	if _, ok := w2.Deadline(); ok {
		t.Fatal("a deadline without one on Close's context")
	}
	cancel2()
	<-w2.Done()
}

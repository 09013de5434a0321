package member

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests drive a Machine directly on simulated time: no goroutines, no
// sleeps, no polling. fakeCoordinator answers a single member: the
// MEMBER_ID_REQUIRED round trip, a new generation with the member as leader
// on each join, and heartbeats that succeed, fail or report a rebalance on
// demand.
type fakeCoordinator struct {
	failHB    bool // heartbeats get no answer (a transport error)
	rebalance bool // heartbeats answer REBALANCE_IN_PROGRESS
	gen       int32
	// expired is a member id the coordinator no longer knows (its session
	// ran out): its joins and heartbeats are UNKNOWN_MEMBER_ID; newID is
	// the id a join without one is given ("m1" when empty).
	expired, newID string
	// joinErr, when set, answers every join with a member id.
	joinErr int16
}

func (f *fakeCoordinator) answer(req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		if r.MemberID == "" {
			resp.ErrorCode = kerr.MemberIDRequired.Code
			resp.MemberID = "m1"
			if f.newID != "" {
				resp.MemberID = f.newID
			}
			return resp, nil
		}
		if r.MemberID == f.expired {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return resp, nil
		}
		if f.joinErr != 0 {
			resp.ErrorCode = f.joinErr
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
		if f.failHB {
			return nil, errors.New("network down")
		}
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		if r.MemberID == f.expired {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return resp, nil
		}
		if f.rebalance {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
		}
		return resp, nil
	case *kmsg.LeaveGroupRequest:
		return r.ResponseKind(), nil
	}
	return nil, errors.New("unexpected request")
}

type clockEvent struct {
	kind string
	at   time.Time
	gen  int32
	err  error
	work uint64
}

// driver runs a Machine against a fakeCoordinator. Requests are answered at
// once; callbacks return at once unless holdAssigned is set, in which case
// Assigned callbacks stay running (a slow callback) until release.
type driver struct {
	t            *testing.T
	m            *Machine
	fc           *fakeCoordinator
	now          time.Time
	events       []clockEvent
	hbs          []time.Time
	cancelled    map[uint64]error
	holdAssigned bool
	held         []Callback // the held Assigned and every callback after it
}

func newDriver(t *testing.T, cooperative bool, mod func(*Config)) *driver {
	t.Helper()
	cfg := Config{
		Group:        "g",
		ProtocolType: "test",
		Protocols:    func() []Protocol { return []Protocol{{Name: "p", Metadata: []byte("x")}} },
		Assign: func(_ context.Context, g Generation) (map[string][]byte, error) {
			return map[string][]byte{g.MemberID: []byte("a")}, nil
		},
		Cooperative:       cooperative,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  30 * time.Second,
		HeartbeatInterval: time.Second,
		LostMargin:        2 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	d := &driver{t: t, fc: &fakeCoordinator{}, now: time.Unix(1000, 0), cancelled: map[uint64]error{}}
	m, err := NewMachine(cfg, d.now, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.m = m
	d.settle()
	return d
}

// settle handles everything the machine produced until it is quiet.
func (d *driver) settle() {
	for i := 0; ; i++ {
		if i > 1000 {
			d.t.Fatal("machine does not settle")
		}
		rd := d.m.Ready()
		if len(rd.Requests)+len(rd.Cancels)+len(rd.Callbacks) == 0 {
			return
		}
		for _, c := range rd.Cancels {
			d.cancelled[c.Work] = c.Cause
			d.events = append(d.events, clockEvent{kind: "cancel", at: d.now, work: c.Work, err: c.Cause})
		}
		for _, cb := range rd.Callbacks {
			if len(d.held) > 0 { // callbacks run one at a time, in order
				d.held = append(d.held, cb)
				continue
			}
			d.run(cb)
		}
		for _, r := range rd.Requests {
			if jr, ok := r.Req.(*kmsg.JoinGroupRequest); ok {
				for _, p := range d.m.cfg.Protocols() {
					jr.Protocols = append(jr.Protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
				}
			}
			if r.Kind == Heartbeat {
				d.hbs = append(d.hbs, d.now)
			}
			resp, err := d.fc.answer(r.Req)
			d.m.Step(d.now, r.ID, resp, err)
		}
	}
}

func (d *driver) run(cb Callback) {
	var as map[string][]byte
	switch cb.Kind {
	case CallAssign:
		as, _ = d.m.cfg.Assign(context.Background(), cb.Gen)
	case CallAssigned:
		d.events = append(d.events, clockEvent{kind: "assigned", at: d.now, gen: cb.Gen.ID, work: cb.Work})
		if d.holdAssigned {
			d.held = append(d.held, cb)
			return
		}
	case CallRevoked:
		d.events = append(d.events, clockEvent{kind: "revoked", at: d.now, gen: cb.Gen.ID})
	case CallLost:
		d.events = append(d.events, clockEvent{kind: "lost", at: d.now, gen: cb.Gen.ID, err: cb.Err})
	}
	d.m.CallbackDone(d.now, cb.ID, as, nil)
}

// advance moves simulated time to t, ticking the machine at each of its
// deadlines on the way.
func (d *driver) advance(to time.Time) {
	for {
		dl := d.m.Ready().Deadline
		if dl.IsZero() || dl.After(to) {
			break
		}
		d.now = dl
		d.m.Tick(d.now)
		d.settle()
	}
	d.now = to
	d.m.Tick(d.now)
	d.settle()
}

func (d *driver) release() {
	d.holdAssigned = false
	held := d.held
	d.held = nil
	d.m.CallbackDone(d.now, held[0].ID, nil, nil)
	for _, cb := range held[1:] {
		d.run(cb)
	}
	d.settle()
}

// take returns the events so far and forgets them.
func (d *driver) take() []clockEvent {
	ev := d.events
	d.events = nil
	return ev
}

func kinds(ev []clockEvent) []string {
	var out []string
	for _, e := range ev {
		out = append(out, e.kind)
	}
	return out
}

func wantKinds(t *testing.T, ev []clockEvent, want ...string) {
	t.Helper()
	got := kinds(ev)
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}

// TestHeartbeatScheduleAndLostDeadline checks that heartbeats go out every
// interval and that the member declares itself lost exactly at (send time of
// the last confirmed heartbeat) + session - margin.
func TestHeartbeatScheduleAndLostDeadline(t *testing.T) {
	d := newDriver(t, false, nil)
	t0 := d.now
	ev := d.take()
	wantKinds(t, ev, "assigned")
	work := ev[0].work

	d.advance(t0.Add(3 * time.Second))
	if len(d.hbs) != 3 {
		t.Fatalf("%d heartbeats in 3s, want 3", len(d.hbs))
	}
	for k, at := range d.hbs {
		if !at.Equal(t0.Add(time.Duration(k+1) * time.Second)) {
			t.Fatalf("heartbeat %d at t0+%v, want t0+%ds", k+1, at.Sub(t0), k+1)
		}
	}
	lastOK := t0.Add(3 * time.Second)
	if got := d.m.aliveUntil; !got.Equal(lastOK.Add(10 * time.Second)) {
		t.Fatalf("session confirmed until t0+%v, want t0+13s", got.Sub(t0))
	}

	d.fc.failHB = true
	deadline := lastOK.Add(10*time.Second - 2*time.Second)
	d.advance(deadline.Add(-time.Millisecond))
	if ev := d.take(); len(ev) != 0 {
		t.Fatalf("%v before the deadline", kinds(ev))
	}
	if _, ok := d.cancelled[work]; ok {
		t.Fatal("work cancelled before the deadline")
	}
	d.advance(deadline)
	// The work stops, Lost runs, and the member rejoins at once (joins
	// still get through).
	ev = d.take()
	wantKinds(t, ev, "cancel", "lost", "assigned")
	if !ev[1].at.Equal(deadline) || !errors.Is(ev[1].err, ErrSessionLost) {
		t.Fatalf("lost at t0+%v with %v, want t0+%v", ev[1].at.Sub(t0), ev[1].err, deadline.Sub(t0))
	}
	if !errors.Is(d.cancelled[work], ErrSessionLost) {
		t.Fatalf("work context cause %v", d.cancelled[work])
	}
	if ev[2].work == work || ev[2].gen != 2 {
		t.Fatalf("rejoined in work %d generation %d", ev[2].work, ev[2].gen)
	}
}

// TestEagerRevokeBeforeRejoin: REBALANCE_IN_PROGRESS cancels the work
// context, calls Revoked, and only then rejoins (generation 2) in a new
// context.
func TestEagerRevokeBeforeRejoin(t *testing.T) {
	d := newDriver(t, false, nil)
	a := d.take()[0]
	d.fc.rebalance = true
	d.advance(d.now.Add(time.Second))
	ev := d.take()
	wantKinds(t, ev, "cancel", "revoked", "assigned")
	if !errors.Is(d.cancelled[a.work], ErrRevoked) {
		t.Fatalf("cause %v", d.cancelled[a.work])
	}
	if b := ev[2]; b.work == a.work || b.gen != 2 {
		t.Fatalf("generation %d in work %d after work %d: eager generation reused the revoked context", b.gen, b.work, a.work)
	}
}

// TestCooperativeKeepsContext: in cooperative mode a rebalance neither
// revokes nor cancels the work context.
func TestCooperativeKeepsContext(t *testing.T) {
	d := newDriver(t, true, nil)
	a := d.take()[0]
	d.fc.rebalance = true
	d.advance(d.now.Add(time.Second))
	ev := d.take()
	wantKinds(t, ev, "assigned")
	if ev[0].work != a.work || ev[0].gen != 2 {
		t.Fatalf("work %d generation %d, want work %d generation 2", ev[0].work, ev[0].gen, a.work)
	}
}

// TestCooperativeRejoinDeadline: a cooperative member that detects a
// rebalance but cannot rejoin (its Assigned callback is still running) stops
// its work by the rebalance timeout, measured from the last confirmed
// heartbeat before the rebalance, less the margin.
func TestCooperativeRejoinDeadline(t *testing.T) {
	d := newDriver(t, true, func(c *Config) {
		c.RebalanceTimeout = 4 * time.Second
		c.LostMargin = time.Second
	})
	t0 := d.now
	// The first Assigned already returned; hold the callbacks from now on by
	// asking for a rebalance whose Assigned blocks.
	wantKinds(t, d.take(), "assigned")
	d.holdAssigned = true
	d.m.Rejoin(d.now)
	d.settle()
	a := d.take()
	wantKinds(t, a, "assigned")    // generation 2, callback still running
	d.advance(t0.Add(time.Second)) // heartbeat OK at t0+1
	if !d.m.lastOK.Equal(t0.Add(time.Second)) {
		t.Fatalf("lastOK t0+%v, want t0+1s", d.m.lastOK.Sub(t0))
	}
	d.fc.rebalance = true
	d.advance(t0.Add(4*time.Second - time.Millisecond))
	if ev := d.take(); len(ev) != 0 {
		t.Fatalf("%v before the rebalance deadline (rejoined while the callback runs?)", kinds(ev))
	}
	// limit = lastOK + rebalance timeout - margin = t0+1+4-1 = t0+4.
	d.advance(t0.Add(4 * time.Second))
	ev := d.take()
	wantKinds(t, ev, "cancel")
	if !ev[0].at.Equal(t0.Add(4*time.Second)) || !errors.Is(d.cancelled[a[0].work], ErrSessionLost) {
		t.Fatalf("work stopped at t0+%v with %v, want t0+4s, ErrSessionLost", ev[0].at.Sub(t0), d.cancelled[a[0].work])
	}
	// Lost runs after the slow callback returns; then the member rejoins.
	d.release()
	wantKinds(t, d.take(), "lost", "assigned")
}

// TestActionTable pins the one table from error code to action.
func TestActionTable(t *testing.T) {
	for _, c := range []struct {
		err  *kerr.Error
		want Action
	}{
		{kerr.MemberIDRequired, ActRetry},
		{kerr.RebalanceInProgress, ActRejoin},
		{kerr.IllegalGeneration, ActResetGeneration},
		{kerr.UnknownMemberID, ActResetMemberID},
		{kerr.NotCoordinator, ActRediscover},
		{kerr.CoordinatorNotAvailable, ActRediscover},
		{kerr.CoordinatorLoadInProgress, ActBackoff},
		{kerr.FencedInstanceID, ActFatal},
		{kerr.InconsistentGroupProtocol, ActFatal},
		{kerr.GroupMaxSizeReached, ActFatal},
		{kerr.GroupAuthorizationFailed, ActFatal},
		{kerr.InvalidRequest, ActFatal},
		{kerr.SaslAuthenticationFailed, ActFatal},
		{kerr.UnsupportedSaslMechanism, ActFatal},
		{kerr.UnknownServerError, ActBackoff},
		{kerr.GroupIDNotFound, ActBackoff},
	} {
		if got := ActionFor(c.err.Code); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
	if ActionFor(0) != ActNone {
		t.Error("NONE is not ActNone")
	}
}

// TestStaticMemberUnknownRejoinsWithoutItsID: a static member the
// coordinator removed (its session ran out while it was cut off) is told
// UNKNOWN_MEMBER_ID; it must rejoin without the old member id, under its
// instance id, as Kafka's client resets it. Keeping the id, it was answered
// UNKNOWN_MEMBER_ID at once, for ever, without a back-off (100,000 JoinGroups
// in 10 s against a live node).
func TestStaticMemberUnknownRejoinsWithoutItsID(t *testing.T) {
	d := newDriver(t, false, func(c *Config) { c.InstanceID = "i1" })
	if d.m.memberID != "m1" || d.fc.gen != 1 {
		t.Fatalf("start: member %q, generation %d", d.m.memberID, d.fc.gen)
	}
	d.fc.expired, d.fc.newID = "m1", "m2"
	d.take()
	d.advance(d.now.Add(time.Second)) // the next heartbeat
	wantKinds(t, d.take(), "cancel", "lost", "assigned")
	if d.m.memberID != "m2" || d.fc.gen != 2 {
		t.Fatalf("after UNKNOWN_MEMBER_ID: member %q, generation %d; want m2 in generation 2", d.m.memberID, d.fc.gen)
	}
}

// TestLateConfirmationAfterDeadlineLoses: a heartbeat answer that is read
// only after the loss deadline has passed (a process resumed from a freeze
// whose member goroutine sees the answer before its timer) must not revive
// the work. Lease.Check has refused since the deadline (ValidUntil <= now),
// and a caller that stopped on that refusal keeps announcing the work until
// the member loses it: the member therefore declares the loss on any input
// at or past the deadline, as if its timer had come first.
func TestLateConfirmationAfterDeadlineLoses(t *testing.T) {
	d := newDriver(t, true, nil)
	t0 := d.now
	work := d.take()[0].work
	// Heartbeats get no answer from t0+1s to t0+6s: the deadline stays
	// at t0+10s-2s.
	d.fc.failHB = true
	d.advance(t0.Add(7*time.Second - time.Millisecond))
	deadline := t0.Add(8 * time.Second)
	if got := d.m.ValidUntil(); !got.Equal(deadline) {
		t.Fatalf("valid until t0+%v, want t0+8s", got.Sub(t0))
	}
	// The heartbeat of t0+7s goes out; its answer is read at t0+8s+1ms,
	// before any Tick at or past the deadline.
	d.now = t0.Add(7 * time.Second)
	d.m.Tick(d.now)
	rd := d.m.Ready()
	if len(rd.Requests) != 1 || rd.Requests[0].Kind != Heartbeat {
		t.Fatalf("requests %v at t0+7s, want one heartbeat", rd.Requests)
	}
	hb := rd.Requests[0]
	d.now = deadline.Add(time.Millisecond)
	if d.now.Before(d.m.ValidUntil()) {
		t.Fatal("a lease checked now would still be valid")
	}
	d.m.Step(d.now, hb.ID, hb.Req.ResponseKind(), nil)
	rd = d.m.Ready()
	lost := false
	for _, c := range rd.Cancels {
		lost = lost || c.Work == work && errors.Is(c.Cause, ErrSessionLost)
	}
	if !lost {
		t.Fatalf("work still live after its deadline (valid until t0+%v, cancels %v): a lease that refused at t0+8s+1ms is not followed by the loss",
			d.m.ValidUntil().Sub(t0), rd.Cancels)
	}
}

package member

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
)

// Tests of the rebalance phase (join, Assign, sync) on simulated time, two
// ways: a machine driven by hand, each request and callback answered by the
// test (hand), and machines against a group.Shard (shardSim), the
// coordinator's own logic, with zero latency.

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// hand is a machine driven by hand: every request and callback waits until
// the test answers it.
type hand struct {
	t        *testing.T
	m        *Machine
	now      time.Time
	deadline time.Time // the machine's last Ready().Deadline
	req      []Request
	cbs      []Callback
	cnl      []Cancel
}

func newHand(t *testing.T, coop bool, mod func(*Config)) *hand {
	t.Helper()
	cfg := Config{
		Group: "g", ProtocolType: "test",
		Protocols: func() []Protocol { return []Protocol{{Name: "p", Metadata: []byte("x")}} },
		Assign: func(_ context.Context, g Generation) (map[string][]byte, error) {
			return map[string][]byte{g.MemberID: []byte("a")}, nil
		},
		Cooperative:    coop,
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 30 * time.Second,
		HeartbeatInterval: time.Second, LostMargin: 2 * time.Second,
		Logger: discard,
	}
	if mod != nil {
		mod(&cfg)
	}
	h := &hand{t: t, now: time.Unix(1000, 0)}
	m, err := NewMachine(cfg, h.now, 1)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	h.collect()
	return h
}

func (h *hand) collect() {
	rd := h.m.Ready()
	h.deadline = rd.Deadline
	h.req = append(h.req, rd.Requests...)
	h.cbs = append(h.cbs, rd.Callbacks...)
	h.cnl = append(h.cnl, rd.Cancels...)
}

func (h *hand) has(k RequestKind) bool {
	for _, q := range h.req {
		if q.Kind == k {
			return true
		}
	}
	return false
}

// take removes and returns the first pending request of kind k.
func (h *hand) take(k RequestKind) Request {
	h.t.Helper()
	for i, q := range h.req {
		if q.Kind == k {
			h.req = append(h.req[:i], h.req[i+1:]...)
			return q
		}
	}
	h.t.Fatalf("no pending %v request (pending %v)", k, h.req)
	return Request{}
}

// callback removes and returns the first pending callback of kind k.
func (h *hand) callback(k CallbackKind) (Callback, bool) {
	for i, c := range h.cbs {
		if c.Kind == k {
			h.cbs = append(h.cbs[:i], h.cbs[i+1:]...)
			return c, true
		}
	}
	return Callback{}, false
}

func (h *hand) mustCallback(k CallbackKind) Callback {
	h.t.Helper()
	c, ok := h.callback(k)
	if !ok {
		h.t.Fatalf("no pending callback %v (pending %v)", k, h.cbs)
	}
	return c
}

func (h *hand) step(q Request, resp kmsg.Response, err error) {
	h.m.Step(h.now, q.ID, resp, err)
	h.collect()
}

func (h *hand) done(c Callback, as map[string][]byte, err error) {
	h.m.CallbackDone(h.now, c.ID, as, err)
	h.collect()
}

func (h *hand) tickTo(t time.Time) {
	if t.After(h.now) {
		h.now = t
	}
	h.m.Tick(h.now)
	h.collect()
}

// answerHB answers every pending heartbeat with code.
func (h *hand) answerHB(code int16) {
	for h.has(Heartbeat) {
		resp := kmsg.NewPtrHeartbeatResponse()
		resp.ErrorCode = code
		h.step(h.take(Heartbeat), resp, nil)
	}
}

func joinAnswer(gen int32, id, leader string, code int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.ErrorCode = code
	resp.Generation = gen
	resp.MemberID = id
	resp.LeaderID = leader
	p := "p"
	resp.Protocol = &p
	resp.Members = []kmsg.JoinGroupResponseMember{{MemberID: id, ProtocolMetadata: []byte("x")}}
	return resp
}

func syncAnswer(code int16, a []byte) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ErrorCode = code
	resp.MemberAssignment = a
	return resp
}

// joinStable brings the machine to stable in generation gen as member m1,
// led by leader (m1: this member leads and runs Assign).
func (h *hand) joinStable(gen int32, leader string) {
	h.t.Helper()
	q := h.take(JoinGroup)
	if q.Req.(*kmsg.JoinGroupRequest).MemberID == "" {
		h.step(q, joinAnswer(-1, "m1", "", kerr.MemberIDRequired.Code), nil)
		q = h.take(JoinGroup)
	}
	h.step(q, joinAnswer(gen, "m1", leader, 0), nil)
	if leader == "m1" {
		h.done(h.mustCallback(CallAssign), map[string][]byte{"m1": []byte("a")}, nil)
	}
	h.step(h.take(SyncGroup), syncAnswer(0, []byte("a")), nil)
	h.done(h.mustCallback(CallAssigned), nil, nil)
	if g, ok := h.m.Generation(); !ok || g.ID != gen {
		h.t.Fatalf("generation %d stable %v, want %d stable", g.ID, ok, gen)
	}
}

// TestAssignRetryKeepsRebalanceDeadline: a cooperative leader whose Assign
// keeps failing rejoins after each failure, and the coordinator, still in
// CompletingRebalance, answers each rejoin at once with the same
// generation. The coordinator's deadline for the leader's SyncGroup was set
// when the generation completed, so the member's must not move with the
// rejoins: its work stops at (first join sent) + rebalance timeout − margin.
func TestAssignRetryKeepsRebalanceDeadline(t *testing.T) {
	h := newHand(t, true, nil)
	h.joinStable(1, "m1")
	h.tickTo(h.now.Add(time.Second))
	h.answerHB(0)
	h.m.Rejoin(h.now) // a cooperative rejoin: the work context stays
	h.collect()
	t1 := h.now // the join that completes generation 2 is sent now
	limit := t1.Add(30 * time.Second)
	want := limit.Add(-2 * time.Second)
	joins, assigns := 0, 0
	for h.now.Before(t1.Add(60*time.Second)) && len(h.cnl) == 0 {
		switch {
		case h.has(JoinGroup):
			joins++
			h.step(h.take(JoinGroup), joinAnswer(2, "m1", "m1", 0), nil)
			if got := h.m.phaseLimit; !got.Equal(limit) {
				t.Fatalf("join %d at t1+%v: rebalance limit t1+%v, want t1+%v", joins, h.now.Sub(t1), got.Sub(t1), limit.Sub(t1))
			}
		case len(h.cbs) > 0:
			c := h.mustCallback(CallAssign)
			assigns++
			h.done(c, nil, errors.New("assignor failed"))
		default:
			h.answerHB(0)
			h.tickTo(h.deadline)
		}
	}
	if joins < 5 || assigns < 5 {
		t.Fatalf("%d joins, %d Assigns before t1+%v: the retries did not happen", joins, assigns, h.now.Sub(t1))
	}
	if len(h.cnl) != 1 || !h.now.Equal(want) || !errors.Is(h.cnl[0].Cause, ErrSessionLost) {
		t.Fatalf("cancels %v at t1+%v, want one (ErrSessionLost) at t1+%v", h.cnl, h.now.Sub(t1), want.Sub(t1))
	}
	if _, ok := h.callback(CallLost); !ok {
		t.Fatal("no Lost callback")
	}
}

// TestSyncRetryKeepsRebalanceDeadline: the same for a cooperative follower
// whose SyncGroup fails (no answer) and whose rejoins are answered with the
// generation it is completing; a new generation, though, starts a new limit.
func TestSyncRetryKeepsRebalanceDeadline(t *testing.T) {
	h := newHand(t, true, nil)
	h.joinStable(1, "m0")
	h.tickTo(h.now.Add(time.Second))
	h.answerHB(kerr.RebalanceInProgress.Code) // the group rebalances: rejoin
	q := h.take(JoinGroup)
	// The first join of generation 2 is answered with a rebalance; the
	// limit of generation 3 counts from its own join.
	h.step(q, joinAnswer(2, "m1", "m0", 0), nil)
	sq := h.take(SyncGroup)
	for range 5 {
		h.tickTo(h.now.Add(time.Second))
		h.answerHB(0)
	}
	h.step(sq, syncAnswer(kerr.RebalanceInProgress.Code, nil), nil)
	t1 := h.now // the join of generation 3 is sent now
	limit := t1.Add(30 * time.Second)
	want := limit.Add(-2 * time.Second)
	syncs := 0
	for h.now.Before(t1.Add(60*time.Second)) && len(h.cnl) == 0 {
		switch {
		case h.has(JoinGroup):
			h.step(h.take(JoinGroup), joinAnswer(3, "m1", "m0", 0), nil)
			if got := h.m.phaseLimit; !got.Equal(limit) {
				t.Fatalf("join at t1+%v: rebalance limit t1+%v, want t1+%v", h.now.Sub(t1), got.Sub(t1), limit.Sub(t1))
			}
		case h.has(SyncGroup):
			syncs++
			h.step(h.take(SyncGroup), nil, errors.New("connection reset"))
		default:
			h.answerHB(0)
			h.tickTo(h.deadline)
		}
	}
	if syncs < 5 {
		t.Fatalf("%d SyncGroups before t1+%v: the retries did not happen", syncs, h.now.Sub(t1))
	}
	if len(h.cnl) != 1 || !h.now.Equal(want) || !errors.Is(h.cnl[0].Cause, ErrSessionLost) {
		t.Fatalf("cancels %v at t1+%v, want one (ErrSessionLost) at t1+%v", h.cnl, h.now.Sub(t1), want.Sub(t1))
	}
}

// TestLostJoinAnswerKeepsRebalanceDeadline: a cooperative follower's
// JoinGroup reaches the coordinator and completes the generation, but its
// answer is lost (the connection breaks); the rejoin after the back-off is
// answered at once with that generation. The coordinator's deadline for the
// member's SyncGroup counts from the generation's completion, which is no
// earlier than the first join was sent, so the member's limit must count
// from that join, not from the rejoin a back-off later: its work stops at
// (first join sent) + rebalance timeout − margin.
func TestLostJoinAnswerKeepsRebalanceDeadline(t *testing.T) {
	h := newHand(t, true, func(c *Config) { c.RetryBackoff = 2 * time.Second })
	h.joinStable(1, "m0")
	h.tickTo(h.now.Add(time.Second))
	h.answerHB(kerr.RebalanceInProgress.Code) // the group rebalances: rejoin
	t1 := h.now                               // the first join of generation 2 is sent now
	limit := t1.Add(30 * time.Second)
	want := limit.Add(-2 * time.Second)
	q := h.take(JoinGroup)
	h.tickTo(t1.Add(500 * time.Millisecond))
	h.answerHB(0)
	h.step(q, nil, errors.New("connection reset")) // generation 2 completed with it; the answer is lost
	for !h.has(JoinGroup) {
		h.answerHB(0)
		h.tickTo(h.deadline)
	}
	t2 := h.now
	if t2.Sub(t1) < 2*time.Second {
		t.Fatalf("rejoined at t1+%v, want after the back-off", t2.Sub(t1))
	}
	h.step(h.take(JoinGroup), joinAnswer(2, "m1", "m0", 0), nil)
	if got := h.m.phaseLimit; !got.Equal(limit) {
		t.Fatalf("rejoin at t1+%v answered with generation 2: rebalance limit t1+%v, want t1+%v", t2.Sub(t1), got.Sub(t1), limit.Sub(t1))
	}
	h.take(SyncGroup) // the leader never syncs: no answer
	for h.now.Before(t1.Add(60*time.Second)) && len(h.cnl) == 0 {
		h.answerHB(0)
		h.tickTo(h.deadline)
	}
	if len(h.cnl) != 1 || !h.now.Equal(want) || !errors.Is(h.cnl[0].Cause, ErrSessionLost) {
		t.Fatalf("cancels %v at t1+%v, want one (ErrSessionLost) at t1+%v", h.cnl, h.now.Sub(t1), want.Sub(t1))
	}
	if _, ok := h.callback(CallLost); !ok {
		t.Fatal("no Lost callback")
	}
}

// shardSim runs machines against a group.Shard with zero latency on
// simulated time. Callbacks run at once unless the member's next Assign is
// made slow or set to fail.
type shardSim struct {
	t      *testing.T
	now    time.Time
	shard  *group.Shard
	ms     []*shardMember
	ticket group.Ticket
	routes map[group.Ticket][2]uint64 // member index, request id
	trace  []string
}

type shardMember struct {
	name      string
	m         *Machine
	deadline  time.Time
	held      []Callback // a slow Assign and the callbacks queued behind it
	slowUntil time.Time  // when the slow Assign returns
	slow      time.Duration
	failUntil time.Time // Assign fails until then
	assigns   int
	cancelAt  []time.Time
	lost      int
}

func newShardSim(t *testing.T) *shardSim {
	gc := group.Defaults()
	gc.InitialRebalanceDelay = 0
	gc.MinSessionTimeout = 100 * time.Millisecond
	return &shardSim{t: t, now: time.Unix(1000, 0), shard: group.NewShard(gc, rand.Reader), routes: map[group.Ticket][2]uint64{}}
}

func (s *shardSim) add(name string, coop bool, mod func(*Config)) *shardMember {
	cfg := Config{
		Group: "g", ProtocolType: "test",
		Protocols: func() []Protocol { return []Protocol{{Name: "p", Metadata: []byte(name)}} },
		Assign: func(_ context.Context, g Generation) (map[string][]byte, error) {
			out := map[string][]byte{}
			for _, mm := range g.Members {
				out[mm.ID] = []byte("a-" + mm.ID)
			}
			return out, nil
		},
		Cooperative: coop, SessionTimeout: 10 * time.Second, RebalanceTimeout: 30 * time.Second,
		HeartbeatInterval: time.Second, LostMargin: 2 * time.Second, Logger: discard,
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := NewMachine(cfg, s.now, uint64(len(s.ms)+1))
	if err != nil {
		s.t.Fatal(err)
	}
	sm := &shardMember{name: name, m: m}
	s.ms = append(s.ms, sm)
	s.pump(len(s.ms) - 1)
	return sm
}

func (s *shardSim) logf(f string, a ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%7.2fs ", s.now.Sub(time.Unix(1000, 0)).Seconds())+fmt.Sprintf(f, a...))
}

func (s *shardSim) dump() {
	for _, l := range s.trace {
		s.t.Log(l)
	}
}

func (s *shardSim) pump(i int) {
	sm := s.ms[i]
	for {
		rd := sm.m.Ready()
		sm.deadline = rd.Deadline
		if len(rd.Requests)+len(rd.Callbacks)+len(rd.Cancels) == 0 {
			return
		}
		for _, c := range rd.Cancels {
			s.logf("%s: cancel work %d (%v)", sm.name, c.Work, c.Cause)
			sm.cancelAt = append(sm.cancelAt, s.now)
		}
		for _, cb := range rd.Callbacks {
			if len(sm.held) > 0 { // callbacks run one at a time, in order
				sm.held = append(sm.held, cb)
				continue
			}
			s.runCallback(i, cb)
		}
		for _, r := range rd.Requests {
			s.send(i, r)
		}
	}
}

func (s *shardSim) runCallback(i int, cb Callback) {
	sm := s.ms[i]
	switch cb.Kind {
	case CallAssign:
		sm.assigns++
		s.logf("%s: Assign generation %d", sm.name, cb.Gen.ID)
		if sm.slow > 0 {
			sm.held = append(sm.held, cb)
			sm.slowUntil = s.now.Add(sm.slow)
			sm.slow = 0
			return
		}
		as, err := sm.m.cfg.Assign(context.Background(), cb.Gen)
		if s.now.Before(sm.failUntil) {
			as, err = nil, errors.New("assignor failed")
		}
		sm.m.CallbackDone(s.now, cb.ID, as, err)
	case CallAssigned:
		s.logf("%s: Assigned generation %d", sm.name, cb.Gen.ID)
		sm.m.CallbackDone(s.now, cb.ID, nil, nil)
	case CallRevoked:
		s.logf("%s: Revoked generation %d", sm.name, cb.Gen.ID)
		sm.m.CallbackDone(s.now, cb.ID, nil, nil)
	case CallLost:
		s.logf("%s: Lost generation %d (%v)", sm.name, cb.Gen.ID, cb.Err)
		sm.lost++
		sm.m.CallbackDone(s.now, cb.ID, nil, nil)
	}
}

func (s *shardSim) send(i int, r Request) {
	sm := s.ms[i]
	r.Req.SetVersion(r.Req.MaxVersion())
	switch q := r.Req.(type) {
	case *kmsg.JoinGroupRequest:
		for _, p := range sm.m.cfg.Protocols() {
			q.Protocols = append(q.Protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		s.logf("%s -> JoinGroup id=%q", sm.name, q.MemberID)
	case *kmsg.SyncGroupRequest:
		s.logf("%s -> SyncGroup generation=%d id=%q", sm.name, q.Generation, q.MemberID)
	}
	if r.Kind == FindCoordinator {
		sm.m.Step(s.now, r.ID, kmsg.NewPtrFindCoordinatorResponse(), nil)
		return
	}
	s.ticket++
	s.routes[s.ticket] = [2]uint64{uint64(i), r.ID}
	var out group.Output
	s.shard.Handle(s.now, s.ticket, group.Client{ID: sm.name, Host: "h"}, r.Req, &out)
	s.settle(&out)
}

func (s *shardSim) settle(out *group.Output) {
	for len(out.Replies)+len(out.Writes) > 0 {
		reps, writes := out.Replies, out.Writes
		out = &group.Output{}
		for _, w := range writes {
			s.shard.WriteDone(s.now, w.ID, 0, out)
		}
		for _, r := range reps {
			rt, ok := s.routes[r.Ticket]
			if !ok {
				continue
			}
			delete(s.routes, r.Ticket)
			i := int(rt[0])
			switch x := r.Resp.(type) {
			case *kmsg.JoinGroupResponse:
				s.logf("%s <- JoinGroup %v generation=%d leader=%v", s.ms[i].name, kerr.ErrorForCode(x.ErrorCode), x.Generation, x.LeaderID == x.MemberID)
			case *kmsg.SyncGroupResponse:
				s.logf("%s <- SyncGroup %v", s.ms[i].name, kerr.ErrorForCode(x.ErrorCode))
			}
			s.ms[i].m.Step(s.now, rt[1], r.Resp, nil)
			s.pump(i)
		}
	}
}

// run advances the simulation to t, at each deadline of the shard, the
// machines and the slow Assigns on the way.
func (s *shardSim) run(to time.Time) {
	for n := 0; n < 100000; n++ {
		var next time.Time
		earlier := func(t time.Time) {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		if d, ok := s.shard.NextDeadline(); ok {
			earlier(d)
		}
		for _, sm := range s.ms {
			earlier(sm.deadline)
			if len(sm.held) > 0 {
				earlier(sm.slowUntil)
			}
		}
		if next.IsZero() || next.After(to) {
			break
		}
		if next.After(s.now) {
			s.now = next
		}
		if d, ok := s.shard.NextDeadline(); ok && !d.After(s.now) {
			var out group.Output
			s.shard.Tick(s.now, &out)
			s.settle(&out)
		}
		for i, sm := range s.ms {
			if len(sm.held) > 0 && !sm.slowUntil.After(s.now) {
				cb, rest := sm.held[0], sm.held[1:]
				sm.held = nil
				as, err := sm.m.cfg.Assign(context.Background(), cb.Gen)
				s.logf("%s: slow Assign returns", sm.name)
				sm.m.CallbackDone(s.now, cb.ID, as, err)
				for _, c := range rest {
					s.runCallback(i, c)
				}
			}
			sm.m.Tick(s.now)
			s.pump(i)
		}
	}
	s.now = to
	for i, sm := range s.ms {
		sm.m.Tick(s.now)
		s.pump(i)
	}
}

// twoMembers starts cooperative members a (the leader) and b, stable.
func twoMembers(t *testing.T, mod func(*Config)) (*shardSim, *shardMember, *shardMember) {
	s := newShardSim(t)
	a := s.add("a", true, mod)
	s.run(s.now.Add(100 * time.Millisecond))
	b := s.add("b", true, mod)
	s.run(s.now.Add(2 * time.Second))
	ga, oka := a.m.Generation()
	gb, okb := b.m.Generation()
	if !oka || !okb || !ga.Leader || ga.ID != gb.ID {
		s.dump()
		t.Fatalf("a: generation %d stable %v leader %v; b: generation %d stable %v", ga.ID, oka, ga.Leader, gb.ID, okb)
	}
	return s, a, b
}

// TestAssignFailureNoDoubleOwnership: against the coordinator's logic, a
// cooperative leader whose Assign fails for a minute stops its work before
// the coordinator removes it and the other member forms a generation
// without it (with the default and with a long maximum back-off).
func TestAssignFailureNoDoubleOwnership(t *testing.T) {
	for _, maxBackoff := range []time.Duration{0, 8 * time.Second} {
		t.Run(fmt.Sprint("max-backoff-", maxBackoff), func(t *testing.T) {
			s, a, b := twoMembers(t, func(c *Config) { c.MaxRetryBackoff = maxBackoff })
			a.failUntil = s.now.Add(60 * time.Second)
			a.m.Rejoin(s.now)
			s.pump(0)
			var bAlone, aStop time.Time
			for s.now.Before(a.failUntil) && (bAlone.IsZero() || aStop.IsZero()) {
				s.run(s.now.Add(100 * time.Millisecond))
				if g, ok := b.m.Generation(); ok && g.Leader && bAlone.IsZero() {
					bAlone = s.now
				}
				if len(a.cancelAt) > 0 && aStop.IsZero() {
					aStop = a.cancelAt[0]
				}
			}
			if bAlone.IsZero() || aStop.IsZero() || !aStop.Before(bAlone) {
				s.dump()
				t.Fatalf("b leads a generation without a from %v; a's work stopped at %v",
					bAlone.Sub(time.Unix(1000, 0)), aStop.Sub(time.Unix(1000, 0)))
			}
			if a.lost != 1 {
				t.Fatalf("a: %d Lost callbacks, want 1", a.lost)
			}
		})
	}
}

// TestSlowAssignSyncsItsGeneration: a cooperative leader holding work whose
// Assign outlasts the rebalance limit less the margin: the watchdog stops
// the work and calls Lost while Assign runs. When Assign returns, the
// SyncGroup names the generation and member id the Assign ran for (not the
// watchdog's reset generation, -1 and ""), and the member keeps its member
// id whatever the answer: accepted, it starts the generation's work in a
// new context; refused with a rebalance, it rejoins with its member id.
func TestSlowAssignSyncsItsGeneration(t *testing.T) {
	for _, code := range []int16{0, kerr.RebalanceInProgress.Code} {
		name := "accepted"
		if code != 0 {
			name = "rebalance"
		}
		t.Run(name, func(t *testing.T) {
			h := newHand(t, true, nil)
			h.joinStable(1, "m1")
			h.tickTo(h.now.Add(time.Second))
			h.answerHB(0)
			h.m.Rejoin(h.now)
			h.collect()
			t1 := h.now
			h.step(h.take(JoinGroup), joinAnswer(2, "m1", "m1", 0), nil)
			a := h.mustCallback(CallAssign)
			// Assign runs 29 s: heartbeats keep the session, but the
			// rebalance limit (t1+30s) less the margin passes at t1+28s.
			for h.now.Before(t1.Add(29 * time.Second)) {
				h.tickTo(h.now.Add(500 * time.Millisecond))
				h.answerHB(0)
			}
			if len(h.cnl) != 1 || !errors.Is(h.cnl[0].Cause, ErrSessionLost) {
				t.Fatalf("cancels %v while Assign runs, want the work stopped (ErrSessionLost)", h.cnl)
			}
			lost := h.mustCallback(CallLost)
			h.done(a, map[string][]byte{"m1": []byte("b")}, nil)
			sq := h.take(SyncGroup)
			sr := sq.Req.(*kmsg.SyncGroupRequest)
			if sr.Generation != 2 || sr.MemberID != "m1" || sr.Protocol == nil || *sr.Protocol != "p" || len(sr.GroupAssignment) != 1 {
				t.Fatalf("SyncGroup generation %d member %q protocol %v with %d assignments, want generation 2, m1, p, 1",
					sr.Generation, sr.MemberID, sr.Protocol, len(sr.GroupAssignment))
			}
			h.done(lost, nil, nil)
			h.step(sq, syncAnswer(code, []byte("b")), nil)
			if code != 0 {
				jr := h.take(JoinGroup).Req.(*kmsg.JoinGroupRequest)
				if jr.MemberID != "m1" {
					t.Fatalf("rejoined with member id %q, want m1", jr.MemberID)
				}
				return
			}
			c := h.mustCallback(CallAssigned)
			if c.Gen.ID != 2 || c.Gen.MemberID != "m1" || string(c.Gen.Assignment) != "b" || c.Work == h.cnl[0].Work {
				t.Fatalf("Assigned generation %d member %q assignment %q work %d (the cancelled work %d)",
					c.Gen.ID, c.Gen.MemberID, c.Gen.Assignment, c.Work, h.cnl[0].Work)
			}
			if g, ok := h.m.Generation(); !ok || g.ID != 2 {
				t.Fatalf("generation %d stable %v, want 2 stable", g.ID, ok)
			}
		})
	}
}

// TestSlowAssignKeepsGeneration: against the coordinator's logic, a leader
// whose Assign takes 29 s of its 30 s rebalance timeout stops its work at
// 28 s (the margin), and its SyncGroup at 29 s completes the generation for
// both members, a keeping its member id, with no further rebalance.
func TestSlowAssignKeepsGeneration(t *testing.T) {
	s, a, b := twoMembers(t, nil)
	g0, _ := a.m.Generation()
	assigns := a.assigns
	a.slow = 29 * time.Second
	a.m.Rejoin(s.now)
	s.pump(0)
	s.run(s.now.Add(60 * time.Second))
	ga, oka := a.m.Generation()
	gb, okb := b.m.Generation()
	if !oka || !okb || ga.ID != g0.ID+1 || gb.ID != ga.ID || ga.MemberID != g0.MemberID || a.assigns != assigns+1 || a.lost != 1 {
		s.dump()
		t.Fatalf("a: generation %d stable %v member %q (was %d, %q), %d Assigns, %d Lost; b: generation %d stable %v",
			ga.ID, oka, ga.MemberID, g0.ID, g0.MemberID, a.assigns-assigns, a.lost, gb.ID, okb)
	}
}

// warnings records the log records at Warn and above.
type warnings struct{ recs *[]slog.Record }

func (w warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w warnings) Handle(_ context.Context, r slog.Record) error {
	*w.recs = append(*w.recs, r)
	return nil
}
func (w warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnings) WithGroup(string) slog.Handler      { return w }

// TestInvalidRequestIsFatal: a JoinGroup answered INVALID_REQUEST (the
// coordinator cannot make sense of the request: resending it cannot help)
// stops the member with a FatalError.
func TestInvalidRequestIsFatal(t *testing.T) {
	h := newHand(t, false, nil)
	h.step(h.take(JoinGroup), joinAnswer(-1, "", "", kerr.InvalidRequest.Code), nil)
	var fe *FatalError
	if err := h.m.Err(); !errors.As(err, &fe) || fe.Request != "JoinGroup" || !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("Err() = %v, want a FatalError for JoinGroup with INVALID_REQUEST", err)
	}
	if !h.m.Done() || h.has(JoinGroup) {
		t.Fatalf("Done %v, JoinGroup pending %v: the member did not stop", h.m.Done(), h.has(JoinGroup))
	}
}

// TestUnexpectedCodeWarns: an error code the table does not list is
// retried after the back-off, and logged at Warn the first time, then at
// most once a minute while it persists; after a sync the same code is news
// again. Transport errors are not warned about (they are expected).
func TestUnexpectedCodeWarns(t *testing.T) {
	for name, code := range map[string]int16{"unknown-server-error": kerr.UnknownServerError.Code, "group-id-not-found": kerr.GroupIDNotFound.Code} {
		t.Run(name, func(t *testing.T) {
			var recs []slog.Record
			h := newHand(t, false, func(c *Config) { c.Logger = slog.New(warnings{&recs}) })
			t0 := h.now
			joins := 0
			var warnAt []time.Duration
			for h.now.Before(t0.Add(150 * time.Second)) {
				if !h.has(JoinGroup) {
					h.tickTo(h.deadline)
					continue
				}
				joins++
				q := h.take(JoinGroup)
				if joins%2 == 0 { // every other join gets no answer at all
					h.step(q, nil, errors.New("connection reset"))
				} else {
					h.step(q, joinAnswer(-1, "", "", code), nil)
				}
				for len(warnAt) < len(recs) {
					warnAt = append(warnAt, h.now.Sub(t0))
				}
			}
			if h.m.Err() != nil || h.m.Done() || joins < 40 {
				t.Fatalf("Err %v Done %v after %d joins: want retries, not a stop", h.m.Err(), h.m.Done(), joins)
			}
			if len(recs) != 3 || warnAt[0] != 0 || warnAt[1] < time.Minute || warnAt[1] > time.Minute+3*time.Second ||
				warnAt[2]-warnAt[1] < time.Minute || warnAt[2]-warnAt[1] > time.Minute+3*time.Second {
				t.Fatalf("%d warnings at %v in 150s, want 3: at once, then about once a minute", len(recs), warnAt)
			}
			var gotCode int64
			recs[1].Attrs(func(a slog.Attr) bool {
				if a.Key == "code" {
					gotCode = a.Value.Int64()
				}
				return true
			})
			if gotCode != int64(code) {
				t.Fatalf("warning %q names code %d, want %d", recs[1].Message, gotCode, code)
			}
			// Synced, the member hears the code again from a heartbeat:
			// warned at once.
			for !h.has(JoinGroup) {
				h.tickTo(h.deadline)
			}
			h.joinStable(1, "m1")
			n := len(recs)
			h.tickTo(h.now.Add(time.Second))
			resp := kmsg.NewPtrHeartbeatResponse()
			resp.ErrorCode = code
			h.step(h.take(Heartbeat), resp, nil)
			if len(recs) != n+1 {
				t.Fatalf("%d warnings for an unexpected heartbeat answer after a sync, want 1", len(recs)-n)
			}
		})
	}
}

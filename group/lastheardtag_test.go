package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeVia sends a DescribeGroups of version v for id through the
// shard's request path, and decodes its encoded answer back with kmsg, as
// a client would.
func (h *h) describeVia(id string, v int16) kmsg.DescribeGroupsResponseGroup {
	h.t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups = v, []string{id}
	tk := h.do(func(t Ticket, out *Output) { h.s.Handle(h.now, t, Client{}, req, out) })
	resp := h.resp(tk).(*kmsg.DescribeGroupsResponse)
	back := kmsg.NewPtrDescribeGroupsResponse()
	back.Version = v
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		h.t.Fatalf("kmsg does not decode the v%d answer: %v", v, err)
	}
	if len(back.Groups) != 1 || back.Groups[0].Group != id {
		h.t.Fatalf("answer %+v", back.Groups)
	}
	return back.Groups[0]
}

// heardOf finds member id's LastHeardTag in d.
func heardOf(t *testing.T, d kmsg.DescribeGroupsResponseGroup, id string) (LastHeard, bool) {
	t.Helper()
	for i := range d.Members {
		if d.Members[i].MemberID == id {
			return LastHeardOf(&d.Members[i])
		}
	}
	t.Fatalf("member %s not described: %+v", id, d.Members)
	return LastHeard{}, false
}

// TestLastHeardClassic: DescribeGroups v5+ gives each member how long ago
// it was last heard from and its session timeout, by the shard's clock; a
// heartbeat resets the silence, a parked JoinGroup counts as heard and
// stops the session; v4 (not flexible) carries no tag, and kmsg decodes
// both answers with every standard field intact.
func TestLastHeardClassic(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	a, b := ids[0], ids[1]
	h.advance(7 * time.Second)
	if code := h.heartbeat("g", a, gen); code != ErrNone {
		t.Fatalf("heartbeat: %d", code)
	}
	h.advance(2 * time.Second)

	d := h.describeVia("g", 5)
	la, ok := heardOf(t, d, a)
	if !ok || la.Silent != 2*time.Second || la.Session != 10*time.Second || la.Parked {
		t.Fatalf("member a: %+v %v, want silent 2s of 10s", la, ok)
	}
	lb, ok := heardOf(t, d, b)
	if !ok || lb.Silent != 9*time.Second || lb.EvictIn() != time.Second {
		t.Fatalf("member b: %+v %v, want silent 9s, evicted in 1s", lb, ok)
	}
	if d.State != "Stable" || len(d.Members) != 2 || d.Members[0].ClientID != "cli" {
		t.Fatalf("standard fields changed: %+v", d)
	}

	old := h.describeVia("g", 4)
	if _, ok := heardOf(t, old, a); ok {
		t.Fatalf("v4 answer carries the tag")
	}

	// a rejoins (its JoinGroup parks until b rejoins or is evicted): it is
	// heard, and its session does not run. A new member parked in its
	// first JoinGroup is heard too, on the new-member join timeout.
	h.join("g", jo{member: a})
	tk := h.newMember("g", jo{client: "late"})
	h.advance(500 * time.Millisecond)
	d = h.describeVia("g", 5)
	la, ok = heardOf(t, d, a)
	if !ok || !la.Parked || la.Silent != 0 {
		t.Fatalf("parked member a: %+v %v", la, ok)
	}
	if h.answered(tk) {
		t.Fatal("the new member's JoinGroup is not parked")
	}
	found := false
	for _, m := range d.Members {
		if m.ClientID == "late" {
			found = true
			if l, ok := LastHeardOf(&m); !ok || !l.Parked || l.Silent != 0 || l.Session != h.s.cfg.NewMemberJoinTimeout {
				t.Fatalf("new member parked in its first join: %+v %v", l, ok)
			}
		}
	}
	if !found {
		t.Fatalf("the new member is not described: %+v", d.Members)
	}
}

// TestLastHeardConsumer: ConsumerGroupDescribe gives each member the time
// since its last ConsumerGroupHeartbeat and the group's session timeout.
func TestLastHeardConsumer(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	r := h.cgJoin("m1", "a")
	expectCode(t, "join", r.ErrorCode, 0)
	h.advance(3 * time.Second)
	h.cgJoin("m2", "a")
	h.advance(4 * time.Second)

	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version, req.Groups = 0, []string{"cg"}
	tk := h.do(func(t Ticket, out *Output) { h.s.Handle(h.now, t, Client{}, req, out) })
	resp := h.resp(tk).(*kmsg.ConsumerGroupDescribeResponse)
	back := kmsg.NewPtrConsumerGroupDescribeResponse()
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("kmsg does not decode the answer: %v", err)
	}
	want := map[string]time.Duration{"m1": 7 * time.Second, "m2": 4 * time.Second}
	if len(back.Groups) != 1 || len(back.Groups[0].Members) != 2 {
		t.Fatalf("answer %+v", back.Groups)
	}
	for i := range back.Groups[0].Members {
		m := &back.Groups[0].Members[i]
		l, ok := ConsumerLastHeardOf(m)
		if !ok || l.Silent != want[m.MemberID] || l.Session != h.s.cfg.ConsumerSessionTimeout || l.Parked {
			t.Errorf("%s: %+v %v, want silent %v of %v", m.MemberID, l, ok, want[m.MemberID], h.s.cfg.ConsumerSessionTimeout)
		}
	}
}

// TestLastHeardTagBadValues: a value that is truncated, too long or
// negative reads as no tag, without panicking.
func TestLastHeardTagBadValues(t *testing.T) {
	good := appendLastHeard(LastHeard{Silent: time.Second, Session: 45 * time.Second})
	neg := appendLastHeard(LastHeard{Silent: -time.Second, Session: time.Second})
	for _, bad := range [][]byte{good[:len(good)-1], append(append([]byte(nil), good...), 0), nil, neg} {
		var m kmsg.DescribeGroupsResponseGroupMember
		m.UnknownTags.Set(LastHeardTag, bad)
		if l, ok := LastHeardOf(&m); ok {
			t.Errorf("%x read as %+v", bad, l)
		}
	}
	var m kmsg.DescribeGroupsResponseGroupMember
	m.UnknownTags.Set(LastHeardTag, good)
	if l, ok := LastHeardOf(&m); !ok || l.Silent != time.Second || l.Session != 45*time.Second {
		t.Errorf("good value read as %+v %v", l, ok)
	}
}

// TestLastHeardAfterSessionTimeoutChange: after a consumer group's session
// timeout changes (its group config), a member's silence is the time since
// its last heartbeat at once, not off by the change until its next
// heartbeat; the session shown is the one its deadline was set with, so
// the time left before the eviction stays exact (the coordinator evicts at
// that deadline). Its next heartbeat takes the new session. Fake clock.
func TestLastHeardAfterSessionTimeoutChange(t *testing.T) {
	own := map[string]Overrides{}
	h, _ := newCH(t, map[string]int32{"a": 2}, func(c *Config) {
		c.GroupOverrides = func(g string) Overrides { return own[g] }
	})
	expectCode(t, "join", h.cgJoin("m1", "a").ErrorCode, 0)
	h.advance(4 * time.Second)
	old := h.s.cfg.ConsumerSessionTimeout
	own["cg"] = Overrides{SessionTimeout: old + 30*time.Second} // the group's session grows by 30 s
	heard := func() LastHeard {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"cg"}
		tk := h.do(func(t Ticket, out *Output) { h.s.Handle(h.now, t, Client{}, req, out) })
		resp := h.resp(tk).(*kmsg.ConsumerGroupDescribeResponse)
		if len(resp.Groups) != 1 || len(resp.Groups[0].Members) != 1 {
			t.Fatalf("answer %+v", resp.Groups)
		}
		l, ok := ConsumerLastHeardOf(&resp.Groups[0].Members[0])
		if !ok {
			t.Fatal("no last-heard tag")
		}
		return l
	}
	if l := heard(); l.Silent != 4*time.Second || l.EvictIn() != old-4*time.Second {
		t.Fatalf("after the change: silent %v, evicted in %v (session %v); want silent 4s, evicted in %v",
			l.Silent, l.EvictIn(), l.Session, old-4*time.Second)
	}
	// Its next heartbeat: the new session.
	h.cgBeat("m1", h.cgOwned("m1"))
	h.advance(2 * time.Second)
	if l := heard(); l.Silent != 2*time.Second || l.Session != old+30*time.Second || l.EvictIn() != old+28*time.Second {
		t.Fatalf("after a heartbeat: %+v, want silent 2s of %v", l, old+30*time.Second)
	}
}

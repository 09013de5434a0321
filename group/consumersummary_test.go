package group

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeConsumerSummary: a DescribeGroups request carrying MembersTag
// gets, on each consumer-protocol group's entry (still answered as a missing
// group), ConsumerSummaryTag with the member count, state, group epoch and
// assignor that ConsumerGroupDescribe gives, and no member; classic and
// missing groups carry none. A request without MembersTag, at any version,
// gets the answer it always got, byte for byte. The console's groups page
// reads the summary instead of sending ConsumerGroupDescribe, which lists
// every member with its subscription and assignment.
func TestDescribeConsumerSummary(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	h.stableGroup("g", 2)
	h.cgJoin("m1", "a")
	h.cgJoin("m2", "a")
	h.cgJoin("m3", "a")
	ids := []string{"g", "cg", "missing"}
	serve := func(v int16, ask bool) (*kmsg.DescribeGroupsResponse, []byte) {
		t.Helper()
		return h.describeWire(t, v, ids, 0, ask)
	}
	unbounded := func(v int16) []byte { return h.describeUnbounded(v, ids) }
	for _, v := range []int16{0, 4, 5, 6} {
		resp, wire := serve(v, false)
		if !bytes.Equal(wire, unbounded(v)) {
			t.Errorf("v%d without the tag: the answer changed", v)
		}
		for i := range resp.Groups {
			if s, ok := ConsumerSummaryOf(&resp.Groups[i]); ok {
				t.Errorf("v%d without the tag: %s carries a summary %+v", v, resp.Groups[i].Group, s)
			}
		}
	}
	// v4 has no tagged fields: nothing travels either way.
	if _, wire := serve(4, true); !bytes.Equal(wire, unbounded(4)) {
		t.Errorf("v4 with the tag set: the answer changed")
	}

	cgd := h.s.DescribeConsumerGroup("cg", 1, false)
	if cgd.ErrorCode != 0 || len(cgd.Members) != 3 || cgd.State == "" || cgd.Epoch <= 0 || cgd.AssignorName == "" {
		t.Fatalf("ConsumerGroupDescribe of cg: %+v", cgd)
	}
	want := ConsumerSummary{Members: 3, State: cgd.State, Epoch: cgd.Epoch, Assignor: cgd.AssignorName}
	for _, v := range []int16{5, 6} {
		resp, _ := serve(v, true)
		c := &resp.Groups[1]
		got, ok := ConsumerSummaryOf(c)
		if !ok || got != want {
			t.Errorf("v%d: cg's summary %+v %v, want %+v (ConsumerGroupDescribe's)", v, got, ok, want)
		}
		// Otherwise the entry it always was: a missing group, no
		// members, no count.
		plain := h.s.DescribeGroup("cg", v, false)
		SetConsumerSummary(&plain, want)
		if !bytes.Equal(entryBytes(v, *c), entryBytes(v, plain)) {
			t.Errorf("v%d: cg's entry is not the missing group's plus the summary: %+v", v, *c)
		}
		if _, ok := MemberCountOf(c); ok || len(c.Members) != 0 || c.State != "Dead" {
			t.Errorf("v%d: cg answered state %q, %d members, count %v", v, c.State, len(c.Members), ok)
		}
		for _, i := range []int{0, 2} {
			if s, ok := ConsumerSummaryOf(&resp.Groups[i]); ok {
				t.Errorf("v%d: %s carries a summary %+v", v, resp.Groups[i].Group, s)
			}
		}
	}

	// The summary follows the group: a member leaves, the epoch moves on.
	leave := h.cgReq(hb{member: "m3", epoch: -1})
	h.do(func(t Ticket, out *Output) { h.s.ConsumerGroupHeartbeat(h.now, t, Client{}, leave, out) })
	cgd = h.s.DescribeConsumerGroup("cg", 1, false)
	resp, _ := serve(6, true)
	if got, ok := ConsumerSummaryOf(&resp.Groups[1]); !ok || got.Members != 2 || got.Epoch != cgd.Epoch || got.Epoch <= want.Epoch || got.State != cgd.State {
		t.Errorf("after m3 left: summary %+v %v; ConsumerGroupDescribe: 2 members, epoch %d, %s", got, ok, cgd.Epoch, cgd.State)
	}

	// A summary that does not decode is not trusted; appended fields are
	// skipped.
	var d kmsg.DescribeGroupsResponseGroup
	d.UnknownTags.Set(ConsumerSummaryTag, []byte{0, 0, 0, 3, 5})
	if _, ok := ConsumerSummaryOf(&d); ok {
		t.Error("a truncated summary is trusted")
	}
	var tmp kmsg.DescribeGroupsResponseGroup
	SetConsumerSummary(&tmp, want)
	var longer []byte
	tmp.UnknownTags.Each(func(_ uint32, val []byte) { longer = append(append(longer, val...), 1, 2, 3) })
	d.UnknownTags.Set(ConsumerSummaryTag, longer)
	if got, ok := ConsumerSummaryOf(&d); !ok || got != want {
		t.Errorf("a summary with a field appended: %+v %v", got, ok)
	}
}

// entryBytes is the wire form of a DescribeGroups answer holding d alone.
func entryBytes(v int16, d kmsg.DescribeGroupsResponseGroup) []byte {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = v
	resp.Groups = []kmsg.DescribeGroupsResponseGroup{d}
	return resp.AppendTo(nil)
}

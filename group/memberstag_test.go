package group

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeMembersTag: a DescribeGroups request carrying MembersTag n
// lists at most the first n members of each classic group (join order) and
// gives each existing classic group its member count in the answer's
// MembersTag; a missing group and a consumer-protocol group carry no count.
// A request without the tag, and one at v4 (no tagged fields), get the
// answer they always got: every member, no count, byte for byte. The
// console's groups page asks for n = 0 to count the members of groups of
// thousands without receiving them.
func TestDescribeMembersTag(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 1})
	h.stableGroup("g", 4)
	h.cgJoin("m1", "a") // consumer-protocol group "cg"
	joinOrder := func() []string {
		var ids []string
		for _, m := range h.s.groups["g"].members {
			ids = append(ids, m.id)
		}
		return ids
	}()
	ids := []string{"g", "missing", "cg"}
	serve := func(v int16, n int32, ask bool) (*kmsg.DescribeGroupsResponse, []byte) {
		t.Helper()
		return h.describeWire(t, v, ids, n, ask)
	}
	unbounded := func(v int16) []byte { return h.describeUnbounded(v, ids) }
	for _, v := range []int16{4, 5, 6} {
		plain, wire := serve(v, 0, false)
		if !bytes.Equal(wire, unbounded(v)) {
			t.Errorf("v%d without the tag: the answer changed", v)
		}
		if len(plain.Groups[0].Members) != 4 {
			t.Errorf("v%d without the tag: %d members, want 4", v, len(plain.Groups[0].Members))
		}
		for i := range plain.Groups {
			if _, ok := MemberCountOf(&plain.Groups[i]); ok {
				t.Errorf("v%d without the tag: group %s carries a count", v, plain.Groups[i].Group)
			}
		}
	}
	// v4 has no tagged fields: the tag cannot travel, nothing is bounded.
	if _, wire := serve(4, 0, true); !bytes.Equal(wire, unbounded(4)) {
		t.Errorf("v4 with the tag set: the answer changed")
	}

	for _, v := range []int16{5, 6} {
		for _, n := range []int32{0, 1, 3, 4, 10} {
			resp, wire := serve(v, n, true)
			g := &resp.Groups[0]
			want := min(int(n), 4)
			if len(g.Members) != want {
				t.Errorf("v%d n=%d: %d members, want %d", v, n, len(g.Members), want)
			}
			for i := range g.Members {
				if g.Members[i].MemberID != joinOrder[i] {
					t.Errorf("v%d n=%d: member %d is %s, want %s (join order)", v, n, i, g.Members[i].MemberID, joinOrder[i])
				}
				if len(g.Members[i].ProtocolMetadata) == 0 || len(g.Members[i].MemberAssignment) == 0 {
					t.Errorf("v%d n=%d: member %d lost its metadata or assignment", v, n, i)
				}
			}
			if c, ok := MemberCountOf(g); !ok || c != 4 {
				t.Errorf("v%d n=%d: count %d %v, want 4", v, n, c, ok)
			}
			if gen, leader, ok := DescribeTagOf(g); !ok || gen <= 0 || leader == "" {
				t.Errorf("v%d n=%d: DescribeTag %d %q %v", v, n, gen, leader, ok)
			}
			if g.State != "Stable" || g.Protocol == "" {
				t.Errorf("v%d n=%d: state %q protocol %q", v, n, g.State, g.Protocol)
			}
			for i := 1; i < len(resp.Groups); i++ {
				if c, ok := MemberCountOf(&resp.Groups[i]); ok {
					t.Errorf("v%d n=%d: group %s carries count %d", v, n, resp.Groups[i].Group, c)
				}
			}
			if n == 0 && len(wire) >= len(unbounded(v))/2 {
				t.Errorf("v%d n=0: an answer of %d bytes, %d unbounded", v, len(wire), len(unbounded(v)))
			}
		}
	}

	// A negative bound, or a value that is not an int32, bounds nothing.
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	if _, ok := MembersRequested(req); ok {
		t.Errorf("bounded without the tag")
	}
	RequestMembers(req, -1)
	if _, ok := MembersRequested(req); ok {
		t.Errorf("bounded by -1")
	}
	req.UnknownTags.Set(MembersTag, []byte{0, 1})
	if _, ok := MembersRequested(req); ok {
		t.Errorf("bounded by a 2-byte value")
	}
	RequestMembers(req, 7)
	if n, ok := MembersRequested(req); !ok || n != 7 {
		t.Errorf("tag 7 read as %d %v", n, ok)
	}
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.UnknownTags.Set(MembersTag, []byte{0, 0, 0})
	if _, ok := MemberCountOf(&d); ok {
		t.Errorf("a truncated count is trusted")
	}
}

// describeWire sends DescribeGroups v for ids through the shard as a client
// would (encoded, then decoded), with tag 10003 asking for at most n members
// when ask, and returns the answer decoded and as it went on the wire.
func (h *h) describeWire(t *testing.T, v int16, ids []string, n int32, ask bool) (*kmsg.DescribeGroupsResponse, []byte) {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups = v, ids
	if ask {
		RequestMembers(req, n)
	}
	back := kmsg.NewPtrDescribeGroupsRequest()
	back.Version = v
	if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	tk := h.do(func(t Ticket, out *Output) { h.s.Handle(h.now, t, Client{}, back, out) })
	wire := h.resp(tk).(*kmsg.DescribeGroupsResponse).AppendTo(nil)
	dec := kmsg.NewPtrDescribeGroupsResponse()
	dec.Version = v
	if err := dec.ReadFrom(wire); err != nil {
		t.Fatal(err)
	}
	return dec, wire
}

// describeUnbounded is what a DescribeGroups without the tags always got:
// DescribeGroup of each id.
func (h *h) describeUnbounded(v int16, ids []string) []byte {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = v
	for _, id := range ids {
		resp.Groups = append(resp.Groups, h.s.DescribeGroupAt(id, v, false, h.now))
	}
	return resp.AppendTo(nil)
}

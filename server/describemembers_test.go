package server

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/security/acl"
)

// TestDescribeGroupsMembersTag: group.MembersTag travels through the
// server as a client sends it, through the authorization of each group and
// the coordinator's split of the request over its partitions: each classic
// group described lists at most the members asked for and carries its
// member count; a refused group and a missing one carry none. A request
// without the tag is answered as before: every member, no count.
func TestDescribeGroupsMembersTag(t *testing.T) {
	e := newAuthzEnv(t)
	ids := []string{"g1", "g2", "g3", "g4", "h"}
	for _, id := range ids {
		if r := e.as(admin, joinRequest(id, 3)).(*kmsg.JoinGroupResponse); r.ErrorCode != 0 {
			t.Fatalf("%s: join %d", id, r.ErrorCode)
		}
	}
	var bs []acl.Binding
	for _, id := range ids[:4] {
		bs = append(bs, allow(alice, acl.OpDescribe, acl.ResourceGroup, id))
	}
	e.grant(bs...)
	describe := func(bound int32) *kmsg.DescribeGroupsResponse {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = 5, append(append([]string{}, ids...), "missing")
		if bound >= 0 {
			group.RequestMembers(req, bound)
		}
		// As a client sends it.
		back := kmsg.NewPtrDescribeGroupsRequest()
		back.Version = 5
		if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		resp := e.as(alice, back).(*kmsg.DescribeGroupsResponse)
		if len(resp.Groups) != len(ids)+1 {
			t.Fatalf("%d groups answered", len(resp.Groups))
		}
		return resp
	}
	for _, bound := range []int32{-1, 0, 1} {
		resp := describe(bound)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			count, counted := group.MemberCountOf(g)
			switch {
			case g.Group == "h":
				if g.ErrorCode != codeGroupAuthz || len(g.Members) != 0 || counted {
					t.Errorf("bound %d: refused h answered %d with %d members, count %v", bound, g.ErrorCode, len(g.Members), counted)
				}
			case g.Group == "missing":
				if len(g.Members) != 0 || counted {
					t.Errorf("bound %d: missing group with %d members, count %v", bound, len(g.Members), counted)
				}
			case bound < 0:
				if g.ErrorCode != 0 || len(g.Members) != 1 || counted {
					t.Errorf("no bound: %s answered %d with %d members, count %v; want its member, no count", g.Group, g.ErrorCode, len(g.Members), counted)
				}
			default:
				if g.ErrorCode != 0 || len(g.Members) != min(int(bound), 1) || !counted || count != 1 {
					t.Errorf("bound %d: %s answered %d with %d members, count %d %v; want %d, count 1", bound, g.Group, g.ErrorCode, len(g.Members), count, counted, min(int(bound), 1))
				}
			}
		}
	}
}

// TestDescribeGroupsConsumerSummary: with group.MembersTag, a
// consumer-protocol group's DescribeGroups entry (a missing group's, as
// always) carries group.ConsumerSummaryTag: the member count, state, group
// epoch and assignor ConsumerGroupDescribe gives, through authorization and
// the coordinator's split. It names no topic, so GROUP DESCRIBE is enough:
// alice, who may describe the group but not its topic, gets the summary
// though ConsumerGroupDescribe hides the group from her
// (TOPIC_AUTHORIZATION_FAILED). A group she may not describe carries none.
// Without the tag the entry is the bytes it always was.
func TestDescribeGroupsConsumerSummary(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("secret", 4)
	for _, m := range []struct{ grp, member string }{{"cg", "m1"}, {"cg", "m2"}, {"cg2", "m1"}} {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, m.grp, m.member, 60000
		hb.SubscribedTopicNames, hb.Topics = []string{"secret"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if r := e.as(admin, hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
			t.Fatalf("%s %s: heartbeat %d", m.grp, m.member, r.ErrorCode)
		}
	}
	if r := e.as(admin, joinRequest("g", 3)).(*kmsg.JoinGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("g: join %d", r.ErrorCode)
	}
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "cg"), allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"))

	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Version, cgd.Groups = 1, []string{"cg"}
	full := e.as(admin, cgd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if full.ErrorCode != 0 || len(full.Members) != 2 {
		t.Fatalf("admin's ConsumerGroupDescribe of cg: %d, %d members", full.ErrorCode, len(full.Members))
	}
	want := group.ConsumerSummary{Members: 2, State: full.State, Epoch: full.Epoch, Assignor: full.AssignorName}
	if hidden := e.as(alice, cgd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; hidden.ErrorCode != codeTopicAuthz {
		t.Fatalf("alice's ConsumerGroupDescribe of cg: %d, want %d (the premise of this test)", hidden.ErrorCode, codeTopicAuthz)
	}

	// asMissing is cg's entry as DescribeGroups always answered it.
	asMissing := func(v int16) kmsg.DescribeGroupsResponseGroup {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group, d.State, d.AuthorizedOperations = "cg", "Dead", -2147483648
		if v >= 6 {
			d.ErrorCode, d.ErrorMessage = 69, kmsg.StringPtr("group cg not found")
		}
		return d
	}
	wire := func(v int16, d kmsg.DescribeGroupsResponseGroup) []byte {
		resp := kmsg.NewPtrDescribeGroupsResponse()
		resp.Version, resp.Groups = v, []kmsg.DescribeGroupsResponseGroup{d}
		return resp.AppendTo(nil)
	}
	for _, v := range []int16{5, 6} {
		for _, ask := range []bool{false, true} {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Version, req.Groups = v, []string{"g", "cg", "cg2"}
			if ask {
				group.RequestMembers(req, 0)
			}
			back := kmsg.NewPtrDescribeGroupsRequest()
			back.Version = v
			if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
				t.Fatal(err)
			}
			resp := e.as(alice, back).(*kmsg.DescribeGroupsResponse)
			if len(resp.Groups) != 3 {
				t.Fatalf("v%d: %d groups answered", v, len(resp.Groups))
			}
			g, cg, cg2 := &resp.Groups[0], &resp.Groups[1], &resp.Groups[2]
			expect := asMissing(v)
			if ask {
				group.SetConsumerSummary(&expect, want)
			}
			if !bytes.Equal(wire(v, *cg), wire(v, expect)) {
				s, ok := group.ConsumerSummaryOf(cg)
				t.Errorf("v%d tag %v: cg answered %+v (summary %+v %v); want the missing group's entry%s", v, ask, *cg, s, ok,
					map[bool]string{true: fmt.Sprintf(" with summary %+v", want)}[ask])
			}
			if cg2.ErrorCode != codeGroupAuthz || cg2.UnknownTags.Len() != 0 {
				t.Errorf("v%d tag %v: refused cg2 answered %d with %d tags", v, ask, cg2.ErrorCode, cg2.UnknownTags.Len())
			}
			if _, ok := group.ConsumerSummaryOf(g); ok || g.ErrorCode != 0 {
				t.Errorf("v%d tag %v: classic g answered %d, summary %v", v, ask, g.ErrorCode, ok)
			}
		}
	}
}

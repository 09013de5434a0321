package server

import (
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

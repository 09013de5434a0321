package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
)

// BenchmarkListGroupsPartitionHold measures one coordinator partition's
// share of a filtered ListGroups (the console's groups page), which it
// serves under the partition's lock, so that a heartbeat or commit of one
// of its groups arriving meanwhile waits for it: a partition of 2,000
// groups (a node of 100,000 on 50 partitions), without a search ("nosearch",
// the first 1,000 by id) and with one that matches none of them ("few"),
// for a principal allowed every group ("all": no per-group check, as for a
// principal with DESCRIBE on the cluster) and for one whose per-group ACLs
// are checked as the partition lists ("acl": the server's check, the
// authorizer over 2 prefixed and 1,000 literal bindings of the principal,
// which allow 1,500 of its 2,000 groups). ns/op is the time the
// partition is held. The same with 20,000 groups in the partition (a node
// of 1,000,000), of which the viewer may describe 2,000.
//
//	go test -run '^$' -bench ListGroupsPartitionHold -benchmem ./group/
func BenchmarkListGroupsPartitionHold(b *testing.B) {
	bindings := []acl.Binding{
		{ResourceType: acl.ResourceGroup, ResourceName: "classic-000", PatternType: acl.PatternPrefixed},
		{ResourceType: acl.ResourceGroup, ResourceName: "team-needle-", PatternType: acl.PatternPrefixed},
	}
	for k := range 1000 {
		bindings = append(bindings, acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: deleteScaleID(1000 + 2*k),
			PatternType: acl.PatternLiteral})
	}
	for i := range bindings {
		bindings[i].Principal, bindings[i].Host = "User:viewer", "*"
		bindings[i].Operation, bindings[i].Permission = acl.OpDescribe, acl.PermissionAllow
	}
	set := acl.NewSet(bindings)
	authz := &acl.Authorizer{SuperUsers: []string{"User:admin"}}
	checked := func(id string) bool {
		return authz.Authorize(set, "User:viewer", "127.0.0.1", acl.OpDescribe, acl.ResourceGroup, id)
	}
	for _, size := range []int{2000, 20000} {
		s, _ := deleteScaleShard(b, size) // classic-000000 ...
		allowed := int32(0)
		for i := range size {
			if checked(deleteScaleID(i)) {
				allowed++
			}
		}
		for _, search := range []struct {
			name string
			f    ListFilter
		}{{"nosearch", ListFilter{Limit: 1000}}, {"few", ListFilter{ID: "needle", Limit: 1000}}} {
			req := kmsg.NewPtrListGroupsRequest()
			req.Version = 5
			RequestListFilter(req, search.f)
			for _, viewer := range []struct {
				name      string
				describes func(string) bool
				listed    int32
			}{{"all", nil, int32(size)}, {"acl", checked, allowed}} {
				b.Run(fmt.Sprintf("groups=%d/%s/%s", size, search.name, viewer.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						resp := s.listFiltered(req, search.f, viewer.describes)
						if sum, ok := ListSummaryOf(resp); !ok || sum.Listed != viewer.listed {
							b.Fatalf("summary %+v, want %d listed", sum, viewer.listed)
						}
					}
				})
			}
		}
	}
}

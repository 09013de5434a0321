package group

import (
	"fmt"
	"testing"
	"time"
)

// TestMemberIndex: a group finds its members by scanning while small and
// through byID once above smallGroup, and every member stays findable as
// the group grows past the threshold, shrinks back and renames members.
func TestMemberIndex(t *testing.T) {
	s := NewShard(Defaults(), seededReader{})
	g := s.newGroup("g", time.Time{})
	check := func(when string) {
		t.Helper()
		for _, m := range g.members {
			if got := g.memberByID(m.id); got != m {
				t.Fatalf("%s: memberByID(%q) = %v, want the member", when, m.id, got)
			}
		}
		if g.memberByID("nobody") != nil {
			t.Fatalf("%s: found a member that is not there", when)
		}
		if big := len(g.members) > smallGroup; big && g.byID == nil {
			t.Fatalf("%s: %d members and no index", when, len(g.members))
		}
		if g.byID != nil && len(g.byID) != len(g.members) {
			t.Fatalf("%s: index holds %d of %d members", when, len(g.byID), len(g.members))
		}
	}
	var out Output
	for i := range 3 * smallGroup {
		g.addMember(&member{id: fmt.Sprintf("m%d", i)}, "consumer")
		check(fmt.Sprintf("after adding m%d", i))
	}
	g.renameMember(g.members[5], "renamed-big")
	check("renamed while big")
	if g.memberByID("m5") != nil {
		t.Fatal("old id still found")
	}
	for len(g.members) > 1 {
		g.removeMember(time.Time{}, g.members[len(g.members)/2], &out)
		check(fmt.Sprintf("after a removal, %d left", len(g.members)))
	}
	if g.byID != nil {
		t.Fatal("a one-member group kept its index")
	}
	g.renameMember(g.members[0], "renamed-small")
	check("renamed while small")
}

package serverassign

import (
	"slices"
	"testing"
)

// Range orders members as Kafka does, ids compared with Java's
// String.compareTo (UTF-16 code units): the static member "😀" (U+1F600)
// precedes "Ａ" (U+FF21), the reverse of Go's byte order, and so gets the
// first range.
func TestRangeOrdersIdsAsJava(t *testing.T) {
	fullwidthA, emoji := "\uFF21", "\U0001F600"
	for _, members := range [][]Member{
		{{ID: "a", InstanceID: fullwidthA, Topics: []string{"t"}}, {ID: "b", InstanceID: emoji, Topics: []string{"t"}}},
		{{ID: "m" + fullwidthA, Topics: []string{"t"}}, {ID: "m" + emoji, Topics: []string{"t"}}},
	} {
		plan, err := Range().Assign(members, map[string]Topic{"t": {Name: "t", Partitions: 2}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := plan[members[1].ID]["t"]; !slices.Equal(got, []int32{0}) {
			t.Errorf("members %v: %s gets %v, want [0]; plan %v", members, members[1].ID, got, plan)
		}
	}
}

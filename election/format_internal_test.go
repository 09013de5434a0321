package election

import (
	"testing"

	"github.com/cohort-dev/cohort/member"
)

// TestFormats: claims and assignments round-trip with their optional tails,
// a claim of the first release (five bytes) still reads, and a version byte
// other than 0 is never guessed at: an unreadable claim fails the leader's
// assignment (that member may be writing), an unreadable assignment reads as
// not the writer.
func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		token    int32
		refusals uint32
		gaveUp   bool
	}{{-1, 0, false}, {7, 0, false}, {7, 3, false}, {-1, 0, true}, {-1, 3, true}} {
		if got, gaveUp, err := decodeClaim(encodeClaim(tc.token, tc.refusals, tc.gaveUp)); err != nil || got != tc.token || gaveUp != tc.gaveUp {
			t.Errorf("claim %+v: %d %v, %v", tc, got, gaveUp, err)
		}
	}
	if got, _, err := decodeClaim([]byte{0, 0, 0, 0, 9}); err != nil || got != 9 {
		t.Errorf("first-release claim: %d, %v", got, err)
	}
	if got, _, err := decodeClaim(nil); err != nil || got != -1 {
		t.Errorf("empty claim: %d, %v (want not writing)", got, err)
	}
	for _, bad := range [][]byte{{1, 0, 0, 0, 7}, {0, 0, 7}} {
		if _, _, err := decodeClaim(bad); err == nil {
			t.Errorf("claim %v read", bad)
		}
	}
	if tok, w, id := decodeAssignment(encodeAssignment(5, "m-1")); !w || tok != 5 || id != "m-1" {
		t.Errorf("assignment: %d %v %q", tok, w, id)
	}
	if tok, w, id := decodeAssignment([]byte{0, 0, 0, 0, 5}); !w || tok != 5 || id != "" {
		t.Errorf("first-release assignment: %d %v %q", tok, w, id)
	}
	if _, w, _ := decodeAssignment([]byte{1, 0, 0, 0, 5, 'm'}); w {
		t.Error("an assignment of version 1 read as the writer's")
	}

	g := member.Generation{ID: 4, Members: []member.GroupMember{
		{ID: "a", Metadata: encodeClaim(-1, 0, false)},
		{ID: "b", Metadata: []byte{1, 0, 0, 0, 2}},
	}}
	if out, err := assign(g); err == nil {
		t.Errorf("assigned %v with an unreadable claim", out)
	}
	g.Members[1].Metadata = encodeClaim(2, 1, false)
	out, err := assign(g)
	if err != nil {
		t.Fatal(err)
	}
	if tok, w, id := decodeAssignment(out["b"]); !w || tok != 2 || id != "b" || out["a"] != nil {
		t.Errorf("assignment %v: b's reads %d %v %q", out, tok, w, id)
	}

	// Nobody claims the role: the smallest id, unless its last term ended
	// by its Func returning and another candidate's did not.
	g.Members[1].Metadata = encodeClaim(-1, 0, false)
	g.Members[0].Metadata = encodeClaim(-1, 0, true)
	if out, err = assign(g); err != nil {
		t.Fatal(err)
	}
	if _, w, id := decodeAssignment(out["b"]); !w || id != "b" || out["a"] != nil {
		t.Errorf("a gave up its term and b did not: assignment %v", out)
	}
	g.Members[1].Metadata = encodeClaim(-1, 0, true)
	if out, err = assign(g); err != nil {
		t.Fatal(err)
	}
	if _, w, _ := decodeAssignment(out["a"]); !w || out["b"] != nil {
		t.Errorf("both gave up their terms: assignment %v, want a (the smallest id)", out)
	}
}

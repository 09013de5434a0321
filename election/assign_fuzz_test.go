package election

import (
	"testing"

	"github.com/cohort-dev/cohort/member"
)

// FuzzAssign: whatever claims the members send (other processes write
// them), the leader's assignment names at most one writer, only a member of
// the generation, each assignment decodes with the id of the member it is
// for, a lone claimant keeps its own token, and two claimants get nobody.
func FuzzAssign(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 7}, []byte{}, []byte{0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 1}, int32(3))
	f.Add([]byte{0, 0, 0, 0, 7}, []byte{0, 0, 0, 0, 8}, []byte{}, int32(9))
	f.Add([]byte{1, 0, 0, 0, 7}, []byte{0}, []byte{0, 0x80, 0, 0, 0}, int32(-1))
	f.Fuzz(func(t *testing.T, a, b, c []byte, gen int32) {
		g := member.Generation{ID: gen, Members: []member.GroupMember{{ID: "b", Metadata: b}, {ID: "a", Metadata: a}, {ID: "c", Metadata: c}}}
		out, err := assign(g)
		claimants := 0
		var token int32
		for _, m := range g.Members {
			tok, _, derr := decodeClaim(m.Metadata)
			if derr != nil {
				if err == nil {
					t.Fatalf("assigned %v with %q's claim %x unreadable", out, m.ID, m.Metadata)
				}
				return
			}
			if tok >= 0 {
				claimants++
				token = tok
			}
		}
		if err != nil {
			t.Fatalf("every claim reads, yet: %v", err)
		}
		writers := 0
		for id, as := range out {
			tok, w, forID := decodeAssignment(as)
			if !w {
				continue
			}
			writers++
			if forID != id {
				t.Fatalf("assignment of %q names %q", id, forID)
			}
			if claimants == 1 && tok != token {
				t.Fatalf("lone claimant's token %d reassigned as %d", token, tok)
			}
			if claimants == 0 && tok != gen {
				t.Fatalf("new writer under token %d, generation %d", tok, gen)
			}
		}
		if len(out) != len(g.Members) || writers > 1 || (claimants > 1) != (writers == 0) {
			t.Fatalf("%d claimants, %d writers: %v", claimants, writers, out)
		}
	})
}

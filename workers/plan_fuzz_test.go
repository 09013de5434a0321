package workers

import (
	"fmt"
	"testing"
)

// FuzzPlan: whatever the members claim to run (names read from their
// metadata, which other processes write: unknown names, repeats, a name
// claimed by two members), Plan gives each resource to at most one member,
// only resources that exist, never one another member claims, and leaves
// out a resource claimed twice.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{3, 0x11, 0x22, 0x44, 8, 1, 1, 2, 3})
	f.Add([]byte{2, 0xff, 0xff, 4, 9, 9, 9, 9})
	f.Add([]byte{4, 0, 0, 0, 0, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, in []byte) {
		next := func() byte {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return b
		}
		// Members: each claims a set of the names r0..r9 (bits of two
		// bytes; r8 and r9 never exist as resources).
		owned := map[string][]string{}
		for m := range int(next()%6) + 1 {
			bits := uint16(next())<<8 | uint16(next())
			var names []string
			for i := range 10 {
				if bits&(1<<i) != 0 {
					names = append(names, fmt.Sprintf("r%d", i))
				}
			}
			if bits&0x8000 != 0 && len(names) > 0 {
				names = append(names, names[0]) // a repeat
			}
			owned[fmt.Sprintf("m%d", m)] = names
		}
		var res []Resource
		for range int(next() % 12) {
			b := next()
			res = append(res, Resource{Name: fmt.Sprintf("r%d", b%8), Weight: int(b>>3) - 4})
		}
		exists := map[string]bool{}
		for _, r := range res {
			exists[r.Name] = true
		}
		claimedBy := map[string][]string{}
		for id, names := range owned {
			for _, n := range dedup(names) {
				claimedBy[n] = append(claimedBy[n], id)
			}
		}
		plan := Plan(owned, res)
		if len(plan) != len(owned) {
			t.Fatalf("plan for %d members, %d in the group", len(plan), len(owned))
		}
		given := map[string]string{}
		for id, names := range plan {
			if _, ok := owned[id]; !ok {
				t.Fatalf("plan for %q, not a member", id)
			}
			for _, n := range names {
				if prev, ok := given[n]; ok {
					t.Fatalf("%s given to %s and %s (owned %v, resources %v)", n, prev, id, owned, res)
				}
				given[n] = id
				if !exists[n] {
					t.Fatalf("%s given to %s is no resource", n, id)
				}
				switch c := claimedBy[n]; {
				case len(c) > 1:
					t.Fatalf("%s, claimed by %v, given to %s", n, c, id)
				case len(c) == 1 && c[0] != id:
					t.Fatalf("%s, run by %s, given to %s", n, c[0], id)
				}
			}
		}
	})
}

package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The generation and leader travel in DescribeTag in flexible versions, survive
// kmsg's encoding and decoding (which is what franz-go clients run), and are
// absent before v5 and for a group that does not exist.
func TestDescribeTag(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 2)
	if gen <= 0 {
		t.Fatalf("generation %d", gen)
	}
	for _, v := range []int16{4, 5, 6} {
		resp := kmsg.NewPtrDescribeGroupsResponse()
		resp.Version = v
		resp.Groups = append(resp.Groups, h.s.DescribeGroup("g", v, false), h.s.DescribeGroup("missing", v, false))
		back := kmsg.NewPtrDescribeGroupsResponse()
		back.Version = v
		if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if len(back.Groups) != 2 || back.Groups[0].State != "Stable" || len(back.Groups[0].Members) != 2 {
			t.Fatalf("v%d: %+v", v, back)
		}
		g, l, ok := DescribeTagOf(&back.Groups[0])
		if v < 5 {
			if ok {
				t.Fatalf("v%d carries the tag", v)
			}
			continue
		}
		if !ok || g != gen || l != ids[0] {
			t.Fatalf("v%d: tag %d %q %v, want %d %q", v, g, l, ok, gen, ids[0])
		}
		if _, _, ok := DescribeTagOf(&back.Groups[1]); ok {
			t.Fatalf("v%d: a missing group carries the tag", v)
		}
	}
	// A truncated value is not trusted.
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.UnknownTags.Set(DescribeTag, []byte{0, 0, 0})
	if _, _, ok := DescribeTagOf(&d); ok {
		t.Fatal("truncated tag decoded")
	}
	// An empty leader (group without members) round-trips as "".
	SetDescribeTag(&d, 7, "")
	if g, l, ok := DescribeTagOf(&d); !ok || g != 7 || l != "" {
		t.Fatal(g, l, ok)
	}
}

package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProtoCounts: counts per name in the short slice and past
// protoCountsFew names in the map, names forgotten at zero, and a member
// listing a name twice counted once, also when it leaves.
func TestProtoCounts(t *testing.T) {
	var c protoCounts
	for i := range 2 * protoCountsFew {
		for range i + 1 {
			c.add(fmt.Sprint("p", i), 1)
		}
	}
	if c.many == nil {
		t.Fatal("still a slice after", 2*protoCountsFew, "names")
	}
	for i := range 2 * protoCountsFew {
		if got := c.get(fmt.Sprint("p", i)); got != i+1 {
			t.Fatalf("p%d: %d, want %d", i, got, i+1)
		}
	}
	c.add("p0", -1)
	if _, ok := c.many["p0"]; ok || c.get("p0") != 0 {
		t.Fatal("p0 kept at zero")
	}

	var s protoCounts
	s.add("range", 1)
	s.add("sticky", 1)
	s.add("range", 1)
	if s.get("range") != 2 || s.get("sticky") != 1 || s.many != nil {
		t.Fatalf("slice counts %+v", s)
	}
	s.add("sticky", -1)
	s.add("range", -2)
	if s.few != nil || s.get("range") != 0 {
		t.Fatalf("not emptied: %+v", s)
	}

	g := &Group{}
	twice := []kmsg.JoinGroupRequestProtocol{{Name: "range"}, {Name: "range"}, {Name: "sticky"}}
	a, b := &member{id: "a"}, &member{id: "b"}
	g.setProtocols(a, twice)
	g.setProtocols(b, []kmsg.JoinGroupRequestProtocol{{Name: "range"}})
	if g.protoCount.get("range") != 2 || g.protoCount.get("sticky") != 1 {
		t.Fatalf("counts %+v", g.protoCount)
	}
	g.setProtocols(a, nil)
	if g.protoCount.get("range") != 1 || g.protoCount.get("sticky") != 0 {
		t.Fatalf("after a leaves: %+v", g.protoCount)
	}
	many := make([]kmsg.JoinGroupRequestProtocol, 3*protoCountsFew)
	for i := range many {
		many[i].Name = fmt.Sprint("n", i%(protoCountsFew+2))
	}
	g.setProtocols(a, many)
	if g.protoCount.get("n0") != 1 || g.protoCount.get("range") != 1 {
		t.Fatalf("many names listed repeatedly: %+v", g.protoCount)
	}
}

package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// movesLogged reads the INFO lines of one node's log that say which
// partitions it started serving (msg "cluster: serving partitions") and
// which it handed over ("cluster: handed partitions over"); it fails the
// test on a partition named twice in the same kind of line.
func movesLogged(t *testing.T, out string) (served, handed map[int32]string) {
	t.Helper()
	served, handed = map[int32]string{}, map[int32]string{}
	for _, l := range strings.Split(out, "\n") {
		var into map[int32]string
		switch {
		case strings.Contains(l, `level=INFO msg="cluster: serving partitions"`):
			into = served
		case strings.Contains(l, `level=INFO msg="cluster: handed partitions over"`):
			into = handed
		default:
			continue
		}
		ids := field(l, "partition_ids")
		n, _ := strconv.Atoi(field(l, "partitions"))
		ps := parseIDs(t, ids)
		if n != len(ps) {
			t.Errorf("partitions=%d but partition_ids=%s: %s", n, ids, l)
		}
		for _, p := range ps {
			if _, dup := into[p]; dup {
				t.Errorf("partition %d named twice: %s", p, l)
			}
			into[p] = l
		}
	}
	return served, handed
}

// field is the value of key in a slog text line ("" when absent).
func field(l, key string) string {
	i := strings.Index(l, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := l[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if s, err := strconv.QuotedPrefix(v); err == nil {
			u, _ := strconv.Unquote(s)
			return u
		}
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// parseIDs reads "0-3,7,9-10".
func parseIDs(t *testing.T, s string) []int32 {
	t.Helper()
	var out []int32
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil {
			t.Fatalf("partition_ids %q: %v", s, err)
		}
		for p := a; p <= b; p++ {
			out = append(out, int32(p))
		}
	}
	return out
}

// labelOf is p's label in a value written by byLabel: "label" for every
// partition, or "label (0-3); other (7)".
func labelOf(t *testing.T, v string, p int32) string {
	t.Helper()
	if !strings.HasSuffix(v, ")") {
		return v
	}
	for _, part := range strings.Split(v, "; ") {
		i := strings.LastIndex(part, " (")
		if i < 0 {
			t.Fatalf("%q: no partitions in %q", v, part)
		}
		if slices.Contains(parseIDs(t, strings.TrimSuffix(part[i+2:], ")")), p) {
			return part[:i]
		}
	}
	return ""
}

// TestSimPartitionMovesLogged: an operator reading the nodes' logs at INFO
// sees every partition that moves, once, on both sides: the node that hands
// it over names it and the node it goes to, the node that takes it over
// names it and where it came from. A node joining a settled cluster, then
// a node crashing (its partitions taken over when its lease ends). Before,
// both sides logged only at DEBUG: a partition's move left no trace at INFO.
func TestSimPartitionMovesLogged(t *testing.T) {
	s := startSim(t, 3, 3*time.Second)
	logs := map[int32]*bytes.Buffer{}
	watch := func(n *simNode) {
		b := &bytes.Buffer{}
		logs[n.id] = b
		n.c.log = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	owner := func() map[int32]int32 {
		m := map[int32]int32{}
		for p := int32(0); p < simParts; p++ {
			h, _ := s.mem.Holder(p)
			m[p] = h.Node
		}
		return m
	}
	for _, n := range s.nodes {
		watch(n)
	}
	before := owner()
	watch(s.add(4, 1))
	s.settle(250*time.Millisecond, 10*time.Second)
	after := owner()

	served, handed := map[int32]map[int32]string{}, map[int32]map[int32]string{}
	for id := int32(1); id <= 4; id++ {
		served[id], handed[id] = movesLogged(t, logs[id].String())
	}
	moved := 0
	for p := int32(0); p < simParts; p++ {
		was, is := before[p], after[p]
		for id := int32(1); id <= 4; id++ {
			if l, ok := served[id][p]; ok && (id != is || was == is) {
				t.Errorf("partition %d (node %d, then %d) in node %d's line: %s", p, was, is, id, l)
			}
			if l, ok := handed[id][p]; ok && (id != was || was == is) {
				t.Errorf("partition %d (node %d, then %d) in node %d's line: %s", p, was, is, id, l)
			}
		}
		if was == is {
			continue
		}
		moved++
		if l, ok := handed[was][p]; !ok {
			t.Errorf("node %d handed %d over to node %d; no INFO line says so:\n%s", was, p, is, logs[was])
		} else if got := labelOf(t, field(l, "to"), p); got != fmt.Sprintf("node %d", is) {
			t.Errorf("partition %d went to node %d; the line says %q: %s", p, is, got, l)
		}
		if l, ok := served[is][p]; !ok {
			t.Errorf("node %d took %d over from node %d; no INFO line says so:\n%s", is, p, was, logs[is])
		} else if got := labelOf(t, field(l, "from"), p); got != fmt.Sprintf("handed over by node %d", was) {
			t.Errorf("partition %d came from node %d; the line says %q: %s", p, was, got, l)
		}
	}
	if moved == 0 {
		t.Fatal("no partition moved to the joining node")
	}

	// Node 2 crashes: the others take its partitions when its lease ends.
	for _, b := range logs {
		b.Reset()
	}
	v := s.node(2)
	gone := v.c.OwnedPartitions()
	v.crashed = true
	s.settle(50*time.Millisecond, 10*time.Second)
	for _, p := range gone {
		found := 0
		for _, id := range []int32{1, 3, 4} {
			served, _ := movesLogged(t, logs[id].String())
			if l, ok := served[p]; ok {
				found++
				if got := labelOf(t, field(l, "from"), p); got != "node 2 left the cluster" {
					t.Errorf("partition %d of the crashed node 2: %s", p, l)
				}
			}
		}
		if found != 1 {
			t.Errorf("partition %d of the crashed node 2 is named by %d nodes' INFO lines, want 1", p, found)
		}
	}
}

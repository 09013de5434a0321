package cluster

import (
	"testing"
)

func moved(a, b []int32) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

func TestAssignBalancedAndStable(t *testing.T) {
	const P = 50
	for n := 1; n <= 9; n++ {
		var ids []int32
		for i := 0; i < n; i++ {
			ids = append(ids, int32(10+i*7))
		}
		a := Assign(P, ids)
		load := map[int32]int{}
		for _, o := range a {
			load[o]++
		}
		for _, id := range ids {
			if l := load[id]; l < P/n || l > (P+n-1)/n {
				t.Fatalf("n=%d: node %d has %d partitions", n, id, l)
			}
		}
		// Same answer whatever the input order.
		rev := make([]int32, len(ids))
		for i := range ids {
			rev[i] = ids[len(ids)-1-i]
		}
		if moved(a, Assign(P, rev)) != 0 {
			t.Fatalf("n=%d: order-dependent", n)
		}
		// Adding one node: ideal is P/(n+1) moves.
		b := Assign(P, append(ids, 1000))
		m := moved(a, b)
		ideal := P / (n + 1)
		t.Logf("nodes %d→%d: %d partitions move (ideal %d)", n, n+1, m, ideal)
		if m > 2*ideal+3 {
			t.Fatalf("nodes %d→%d: %d partitions move, ideal %d", n, n+1, m, ideal)
		}
		// Removing one node: its partitions must move; few others.
		if n > 1 {
			c := Assign(P, ids[1:])
			m := moved(a, c)
			t.Logf("nodes %d→%d: %d partitions move (node had %d)", n, n-1, m, load[ids[0]])
			if m > 2*load[ids[0]]+3 {
				t.Fatalf("nodes %d→%d: %d partitions move, node had %d", n, n-1, m, load[ids[0]])
			}
		}
	}
	for _, o := range Assign(5, nil) {
		if o != -1 {
			t.Fatal("no nodes must give -1")
		}
	}
}

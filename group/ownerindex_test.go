package group

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOwnerIndex checks the partition-holder index against a plain map
// over random operations, partitions spanning the dense slots, the sparse
// map (negative and huge partition numbers, which only a classic member's
// assignment bytes can name) and the slice growth in between.
func TestOwnerIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var o ownerIndex
	ref := map[topicPartition]string{}
	parts := []int32{-5, -1, 0, 1, 2, 7, 63, 64, 1000, ownerDense - 1, ownerDense, 1 << 30, 1<<31 - 1}
	topics := []string{"a", "b"}
	members := []string{"m1", "m2", "m3"}
	for i := 0; i < 5000; i++ {
		tp := topicPartition{topics[rng.IntN(2)], parts[rng.IntN(len(parts))]}
		id := members[rng.IntN(3)]
		switch rng.IntN(3) {
		case 0:
			o.set(tp.topic, tp.partition, id)
			ref[tp] = id
		case 1:
			o.drop(tp.topic, tp.partition, id)
			if ref[tp] == id {
				delete(ref, tp)
			}
		case 2:
			var ps []int32
			for _, p := range parts {
				if rng.IntN(3) == 0 {
					ps = append(ps, p) // sorted: parts is
				}
			}
			o.setAll(tp.topic, ps, id)
			for _, p := range ps {
				ref[topicPartition{tp.topic, p}] = id
			}
		}
		for _, t2 := range topics {
			held := 0
			for tp := range ref {
				if tp.topic == t2 && tp.partition >= 0 && tp.partition < ownerDense {
					held++
				}
			}
			if s := o.dense[t2]; held == 0 && s != nil || held > 0 && (s == nil || s.held != held) {
				t.Fatalf("op %d: topic %s: %d partitions held, the index has %+v", i, t2, held, s)
			}
			for _, p := range parts {
				got, ok := o.get(t2, p)
				want, wok := ref[topicPartition{t2, p}]
				if got != want || ok != wok {
					t.Fatalf("op %d: get(%s, %d) = %q %v, want %q %v", i, t2, p, got, ok, want, wok)
				}
			}
		}
	}
	if s := o.dense["a"]; s != nil && len(s.holder) > ownerDense {
		t.Fatalf("dense slice grew to %d, past %d", len(s.holder), ownerDense)
	}
}

// TestTpsetAddAll: addAll merges any order, with duplicates, into the
// sorted set, as repeated add does.
func TestTpsetAddAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 500; i++ {
		a, b := tpset{}, tpset{}
		for j := rng.IntN(4); j > 0; j-- {
			ps := make([]int32, rng.IntN(8))
			for k := range ps {
				ps[k] = int32(rng.IntN(10))
			}
			if rng.IntN(2) == 0 {
				slices.Sort(ps)
				ps = slices.Compact(ps)
			}
			a.addAll("t", ps)
			for _, p := range ps {
				b.add("t", p)
			}
		}
		if !a.equal(b) || !slices.IsSorted(a["t"]) {
			t.Fatalf("case %d: addAll %v, add %v", i, a, b)
		}
	}
}

package group

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Choosing an event's members and waits before building them
// (storeCandidates, storeWaits) stores the same event as bounding the full
// lists: random groups of 0 to 1,000 members, a share of them changed,
// waits in both phases with many equal times, byte budgets from roomy to
// tight (so that boundStored halves the lists it was given).
func TestStoreCandidatesMatchFullBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 400 {
		n := rng.IntN(1001)
		if iter%4 == 0 {
			n = rng.IntN(3 * storedListMax)
		}
		share := rng.Float64()
		members := make([]MemberChange, n)
		for i := range members {
			mc := MemberChange{MemberID: fmt.Sprintf("m-%06d-%x", rng.IntN(1_000_000), i)}
			if rng.Float64() < share {
				if rng.IntN(3) == 0 {
					mc.New = true
				} else {
					mc.Changed = true
				}
				mc.Added = []TopicPartitions{{Topic: "t", Partitions: make([]int32, rng.IntN(40))}}
			}
			members[i] = mc
		}
		var waits []Wait
		for _, m := range members {
			for _, ph := range []string{"join", "sync"} {
				if rng.IntN(2) == 0 {
					waits = append(waits, Wait{MemberID: m.MemberID, Phase: ph, WaitedMs: int64(rng.IntN(50))})
				}
			}
		}
		budget := []int{storedEventBytes, 64 << 10, 8 << 10, 2 << 10}[rng.IntN(4)]

		// The full lists, as rbFinish built them before.
		full := RebalanceEvent{Group: "g", Cause: Cause{Kind: CauseOther}}
		full.Members = slices.Clone(members)
		slices.SortFunc(full.Members, func(a, b MemberChange) int { return strings.Compare(a.MemberID, b.MemberID) })
		full.WaitedFor = slices.Clone(waits)
		sortWaits(full.WaitedFor)
		want := boundStored(&full, budget)

		// Chosen first.
		chosen := RebalanceEvent{Group: "g", Cause: Cause{Kind: CauseOther}}
		var o Omitted
		chosen.WaitedFor, o.WaitedFor = storeWaits(slices.Clone(waits))
		keep, om := storeCandidates(n, func(i int) string { return members[i].MemberID },
			func(i int) bool { return memberChanged(&members[i]) })
		o.Members = om
		for _, i := range keep {
			chosen.Members = append(chosen.Members, members[i])
		}
		if o != (Omitted{}) {
			chosen.Omitted = &o
		}
		if len(chosen.Members) > storedListMax || len(chosen.WaitedFor) > storedListMax {
			t.Fatalf("iteration %d: chose %d members and %d waits", iter, len(chosen.Members), len(chosen.WaitedFor))
		}
		got := boundStored(&chosen, budget)
		if !bytes.Equal(got, want) {
			t.Fatalf("iteration %d (%d members, %.2f changed, budget %d):\nchosen first: %.400s\nfull lists:   %.400s", iter, n, share, budget, got, want)
		}
	}
}

// smallestK gives the k smallest in order for every k, including 0 and
// more than there are.
func TestSmallestK(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		xs := make([]int, rng.IntN(300))
		for i := range xs {
			xs[i] = rng.IntN(100)
		}
		k := rng.IntN(len(xs) + 2)
		want := slices.Sorted(slices.Values(xs))[:min(k, len(xs))]
		got := smallestK(slices.Clone(xs), k, func(a, b int) int { return a - b })
		if !slices.Equal(got, want) {
			t.Fatalf("k=%d of %v: %v, want %v", k, xs, got, want)
		}
	}
}

// equalUnion agrees with building the union and comparing.
func TestEqualUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	set := func() tpset {
		s := tpset{}
		for range rng.IntN(6) {
			s.add([]string{"a", "b"}[rng.IntN(2)], int32(rng.IntN(4)))
		}
		return s
	}
	seen := map[bool]int{}
	for range 2000 {
		s, a, b := set(), set(), set()
		if rng.IntN(3) == 0 { // make equality likely
			s = a.clone()
			s.addSet(b)
		}
		u := a.clone()
		u.addSet(b)
		want := s.equal(u)
		seen[want]++
		if got := equalUnion(s, a, b); got != want {
			t.Fatalf("equalUnion(%v, %v, %v) = %v, want %v", s, a, b, got, want)
		}
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Fatalf("cases: %v", seen)
	}
}

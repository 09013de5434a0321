package sticky

import (
	"errors"
	"math/rand"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
)

func assignOrFatal(t *testing.T, a assign.Assignor, g group) map[string]assign.Assignment {
	t.Helper()
	out, err := a.Assign(g.members, g.topics)
	if err != nil {
		t.Fatalf("Assign: %v", err)
	}
	return out
}

// checkEqualSubscriptionsBalanced asserts that members with the same
// subscription differ by at most one partition.
func checkEqualSubscriptionsBalanced(t *testing.T, g group, loads []int) {
	t.Helper()
	for i, a := range g.members {
		for j, b := range g.members {
			if slices.Equal(a.Topics, b.Topics) && loads[i] > loads[j]+1 {
				t.Fatalf("%s has %d partitions, %s with the same subscription %d", a.ID, loads[i], b.ID, loads[j])
			}
		}
	}
}

// TestOptimalVsBruteForce compares the eager plan with every possible plan
// of small groups, with differing subscriptions and conflicting history.
func TestOptimalVsBruteForce(t *testing.T) {
	seeds := 1500
	if testing.Short() {
		seeds = 300
	}
	cases := 0
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		g := genGroup(rng, genOpts{maxMembers: 4, maxTopics: 3, maxParts: 3, mixed: seed%4 != 0, history: true, conflicts: seed%3 == 0})
		in := toInstance(g)
		if len(in.eligible) > 8 {
			continue
		}
		cases++
		out := assignOrFatal(t, New(), g)
		got := validate(t, g, out, true)
		wantLoads, wantKept := bruteForce(in)
		_, prev := refClaims(g.members)
		loads := loadsOf(g, got)
		if v := sortedDesc(loads); !slices.Equal(v, wantLoads) {
			t.Fatalf("seed %d: loads %v, optimum %v", seed, v, wantLoads)
		}
		if k := kept(prev, got); k != wantKept {
			t.Fatalf("seed %d: kept %d partitions, optimum keeps %d (moved %d more than needed)", seed, k, wantKept, wantKept-k)
		}
	}
	if cases < seeds/2 {
		t.Fatalf("only %d brute-force cases", cases)
	}
}

// TestOptimalVsMinCostFlow does the same on larger groups against an
// independent min-cost-flow solver.
func TestOptimalVsMinCostFlow(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 80
	}
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		g := genGroup(rng, genOpts{maxMembers: 9, maxTopics: 5, maxParts: 9, mixed: seed%5 != 0, history: true, conflicts: seed%2 == 0})
		in := toInstance(g)
		out := assignOrFatal(t, New(), g)
		got := validate(t, g, out, true)
		wantSq, wantKept := minCostFlow(in)
		_, prev := refClaims(g.members)
		loads := loadsOf(g, got)
		if sq := sumSquares(loads); sq != wantSq {
			t.Fatalf("seed %d: sum of squared loads %d, optimum %d (loads %v)", seed, sq, wantSq, loads)
		}
		if k := kept(prev, got); k != wantKept {
			t.Fatalf("seed %d: kept %d, optimum %d", seed, k, wantKept)
		}
		checkEqualSubscriptionsBalanced(t, g, loads)
	}
}

// TestOptimalManySmall runs many small mixed groups against the
// min-cost-flow reference; some need the final re-sticking phase.
func TestOptimalManySmall(t *testing.T) {
	seeds := 30000
	if testing.Short() {
		seeds = 3000
	}
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		g := genGroup(rng, genOpts{maxMembers: 6, maxTopics: 4, maxParts: 5, mixed: true, history: true, conflicts: seed%2 == 0})
		got := validate(t, g, assignOrFatal(t, New(), g), true)
		wantSq, wantKept := minCostFlow(toInstance(g))
		_, prev := refClaims(g.members)
		if sq, k := sumSquares(loadsOf(g, got)), kept(prev, got); sq != wantSq || k != wantKept {
			t.Fatalf("seed %d: squares %d kept %d, optimum %d %d", seed, sq, k, wantSq, wantKept)
		}
	}
}

// TestRestick is a group where balancing alone leaves the extra partition
// with the wrong member: t2 only has subscriber m2, t1 has m0 and m2, t0
// everyone. Keeping the optimum needs a balance-neutral exchange.
func TestRestick(t *testing.T) {
	owned := func(tps ...assign.TopicPartitions) []assign.TopicPartitions { return tps }
	g := group{
		topics: map[string]assign.Topic{"t0": {Name: "t0", Partitions: 4}, "t1": {Name: "t1", Partitions: 5}, "t2": {Name: "t2", Partitions: 4}},
		members: []assign.Member{
			{ID: "m0", Topics: []string{"t0", "t1"}, Generation: 3, Owned: owned(assign.TopicPartitions{Topic: "t0", Partitions: []int32{1, 3}}, assign.TopicPartitions{Topic: "t1", Partitions: []int32{2}})},
			{ID: "m1", Topics: []string{"t0"}, Generation: 3, Owned: owned(assign.TopicPartitions{Topic: "t0", Partitions: []int32{0}})},
			{ID: "m2", Topics: []string{"t0", "t1", "t2"}, Generation: 3, Owned: owned(assign.TopicPartitions{Topic: "t0", Partitions: []int32{2}}, assign.TopicPartitions{Topic: "t1", Partitions: []int32{0, 4}}, assign.TopicPartitions{Topic: "t2", Partitions: []int32{0}})},
		},
	}
	got := validate(t, g, assignOrFatal(t, New(), g), true)
	wantLoads, wantKept := bruteForce(toInstance(g))
	_, prev := refClaims(g.members)
	if l, k := sortedDesc(loadsOf(g, got)), kept(prev, got); !slices.Equal(l, wantLoads) || k != wantKept {
		t.Fatalf("loads %v kept %d, optimum %v %d", l, k, wantLoads, wantKept)
	}
}

// TestProperties runs bigger random groups through both assignors and a
// follow-up cooperative round.
func TestProperties(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		g := genGroup(rng, genOpts{maxMembers: 40, maxTopics: 8, maxParts: 40, mixed: seed%2 == 0, history: true, conflicts: seed%3 != 0})

		eager := assignOrFatal(t, New(), g)
		got := validate(t, g, eager, true)
		loads := loadsOf(g, got)
		checkEqualSubscriptionsBalanced(t, g, loads)

		// Determinism: shuffled input, same plan.
		shuffled := group{members: slices.Clone(g.members), topics: g.topics}
		rng.Shuffle(len(shuffled.members), func(i, j int) {
			shuffled.members[i], shuffled.members[j] = shuffled.members[j], shuffled.members[i]
		})
		if again := assignOrFatal(t, New(), shuffled); !reflect.DeepEqual(again, eager) {
			t.Fatalf("seed %d: plan depends on member order", seed)
		}

		coop := assignOrFatal(t, NewCooperative(), g)
		checkCooperative(t, g, coop)
		if again := assignOrFatal(t, NewCooperative(), shuffled); !reflect.DeepEqual(again, coop) {
			t.Fatalf("seed %d: cooperative plan depends on member order", seed)
		}
	}
}

// checkCooperative verifies KIP-429 safety of one round, then plays the
// follow-up round (members own exactly what they were given, one
// generation later) and verifies it converges: balanced, nothing withheld,
// nothing that anyone owns moves.
func checkCooperative(t *testing.T, g group, out map[string]assign.Assignment) {
	t.Helper()
	got := validate(t, g, out, false)
	claimsOf := ownedNow(g.members)
	for k, id := range got {
		mine, iClaim := claimsOf[id][k]
		for other, c := range claimsOf {
			if gen, ok := c[k]; ok && other != id && (!iClaim || gen > mine) {
				t.Fatalf("%s/%d given to %s while %s still owns it", k.topic, k.part, id, other)
			}
		}
	}

	next := group{topics: g.topics}
	for _, m := range g.members {
		m.Owned = out[m.ID].Partitions
		m.Generation = 100
		m.UserData = NewCooperative().UserData(m.Owned, m.Generation)
		next.members = append(next.members, m)
	}
	out2 := assignOrFatal(t, NewCooperative(), next)
	got2 := validate(t, next, out2, true)
	for k, id := range got {
		if got2[k] != id {
			t.Fatalf("follow-up round moved %s/%d from %s to %s", k.topic, k.part, id, got2[k])
		}
	}
	// The follow-up is as balanced as the eager plan.
	eager := validate(t, g, assignOrFatal(t, New(), g), true)
	if a, b := sortedDesc(loadsOf(next, got2)), sortedDesc(loadsOf(g, eager)); !slices.Equal(a, b) {
		t.Fatalf("follow-up loads %v, eager %v", a, b)
	}
}

// ownedNow is what members report owning right now: the subscription's
// owned partitions, with their generation.
func ownedNow(members []assign.Member) map[string]map[tp]int32 {
	out := map[string]map[tp]int32{}
	for _, m := range members {
		c := map[tp]int32{}
		out[m.ID] = c
		for _, t := range m.Owned {
			for _, p := range t.Partitions {
				c[tp{t.Topic, p}] = m.Generation
			}
		}
	}
	return out
}

// TestCooperativeRevokesFirst is the KIP-429 walk-through: a member joins,
// the partitions it should get are first only taken from their owners.
func TestCooperativeRevokesFirst(t *testing.T) {
	topics := map[string]assign.Topic{"t": {Name: "t", Partitions: 4}}
	members := []assign.Member{
		{ID: "a", Topics: []string{"t"}, Owned: []assign.TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}, Generation: 3},
		{ID: "b", Topics: []string{"t"}, Owned: []assign.TopicPartitions{{Topic: "t", Partitions: []int32{2, 3}}}, Generation: 3},
		{ID: "c", Topics: []string{"t"}, Generation: -1},
	}
	out, err := NewCooperative().Assign(members, topics)
	if err != nil {
		t.Fatal(err)
	}
	count := func(id string) int {
		n := 0
		for _, tp := range out[id].Partitions {
			n += len(tp.Partitions)
		}
		return n
	}
	if count("a")+count("b") != 3 || count("c") != 0 {
		t.Fatalf("round 1: want one partition revoked and none given to c, got %v", out)
	}
	members[0].Owned, members[1].Owned = out["a"].Partitions, out["b"].Partitions
	members[0].Generation, members[1].Generation, members[2].Generation = 4, 4, 4
	out, err = NewCooperative().Assign(members, topics)
	if err != nil {
		t.Fatal(err)
	}
	if count("c") != 1 || count("a")+count("b") != 3 {
		t.Fatalf("round 2: want c to get the revoked partition, got %v", out)
	}
}

func TestStickyKeepsOwnership(t *testing.T) {
	topics := map[string]assign.Topic{"x": {Name: "x", Partitions: 6}, "y": {Name: "y", Partitions: 3}}
	a := New()
	members := []assign.Member{
		{ID: "m1", Topics: []string{"x", "y"}, UserData: a.UserData([]assign.TopicPartitions{{Topic: "x", Partitions: []int32{0, 1, 2}}, {Topic: "y", Partitions: []int32{0}}}, 2)},
		{ID: "m2", Topics: []string{"x", "y"}, UserData: a.UserData([]assign.TopicPartitions{{Topic: "x", Partitions: []int32{3, 4, 5}}, {Topic: "y", Partitions: []int32{1, 2}}}, 2)},
		{ID: "m3", Topics: []string{"x", "y"}},
	}
	out, err := a.Assign(members, topics)
	if err != nil {
		t.Fatal(err)
	}
	// 9 partitions, 3 each: m1 gives 1, m2 gives 2, m3 takes 3.
	g := group{members: members, topics: topics}
	got := validate(t, g, out, true)
	_, prev := refClaims(members)
	if k := kept(prev, got); k != 6 {
		t.Fatalf("kept %d, want 6: %v", k, out)
	}
	if l := loadsOf(g, got); !slices.Equal(l, []int{3, 3, 3}) {
		t.Fatalf("loads %v", l)
	}
}

// TestGenerations: the highest generation wins a conflicting claim
// (KIP-341); a tie at the highest generation gives the partition no
// previous owner.
func TestGenerations(t *testing.T) {
	topics := map[string]assign.Topic{"t": {Name: "t", Partitions: 2}}
	ud := New().UserData
	own := func(ps ...int32) []assign.TopicPartitions {
		return []assign.TopicPartitions{{Topic: "t", Partitions: ps}}
	}
	for _, tc := range []struct {
		name   string
		m1, m2 []byte
		want1  []int32
	}{
		{"newer wins", ud(own(0), 5), ud(own(0, 1), 4), []int32{0}},
		{"newer wins, other order", ud(own(0, 1), 4), ud(own(0), 5), []int32{1}},
		{"v0 loses to v1", ud(own(1), 0), ud(own(1, 0), -1), []int32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := []assign.Member{
				{ID: "m1", Topics: []string{"t"}, UserData: tc.m1},
				{ID: "m2", Topics: []string{"t"}, UserData: tc.m2},
			}
			out, err := New().Assign(members, topics)
			if err != nil {
				t.Fatal(err)
			}
			if got := out["m1"].Partitions; len(got) != 1 || !slices.Equal(got[0].Partitions, tc.want1) {
				t.Fatalf("m1 got %v, want %v", got, tc.want1)
			}
		})
	}
}

func TestUserDataRoundTrip(t *testing.T) {
	owned := []assign.TopicPartitions{{Topic: "b", Partitions: []int32{3, 1}}, {Topic: "a", Partitions: []int32{0}}, {Topic: "b", Partitions: []int32{2}}}
	for _, gen := range []int32{-1, 0, 9} {
		b := New().UserData(owned, gen)
		got, g, err := decodeUserData(b)
		if err != nil {
			t.Fatal(err)
		}
		want := []assign.TopicPartitions{{Topic: "a", Partitions: []int32{0}}, {Topic: "b", Partitions: []int32{1, 2, 3}}}
		if !reflect.DeepEqual(got, want) || g != gen {
			t.Fatalf("gen %d: decoded %v gen %d", gen, got, g)
		}
	}
	if _, _, err := decodeUserData([]byte{0, 0, 0, 1, 0}); !errors.Is(err, errUserData) {
		t.Fatalf("truncated user data: err %v", err)
	}
}

func TestBadInput(t *testing.T) {
	topics := map[string]assign.Topic{"t": {Name: "t", Partitions: 3}, "empty": {Name: "empty", Partitions: -4}}
	members := []assign.Member{
		{ID: "a", Topics: []string{"t", "t", "empty", "nope"}, UserData: []byte{0xff, 0xff, 0xff, 0xff, 0}},
		{ID: "b", Topics: []string{"t"}, Owned: []assign.TopicPartitions{{Topic: "t", Partitions: []int32{-1, 7, 2, 2}}, {Topic: "nope", Partitions: []int32{0}}}, Generation: 1},
		{ID: "c"},
	}
	out, err := NewCooperative().Assign(members, topics)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, group{members, topics}, out, true)
	if _, ok := out["c"]; !ok {
		t.Fatal("member without subscriptions missing")
	}
	if _, err := New().Assign(append(members, assign.Member{ID: "a"}), topics); !errors.Is(err, ErrDuplicateMember) {
		t.Fatalf("duplicate member: err %v", err)
	}
	if out, err := New().Assign(nil, topics); err != nil || len(out) != 0 {
		t.Fatalf("no members: %v %v", out, err)
	}
}

func FuzzUserData(f *testing.F) {
	f.Add(New().UserData([]assign.TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}, 3))
	f.Add([]byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		members := []assign.Member{{ID: "a", Topics: []string{"t"}, UserData: b}, {ID: "b", Topics: []string{"t"}, UserData: b}}
		topics := map[string]assign.Topic{"t": {Name: "t", Partitions: 4}}
		for _, a := range []assign.Assignor{New(), NewCooperative()} {
			out, err := a.Assign(members, topics)
			if err != nil {
				t.Fatal(err)
			}
			validate(t, group{members, topics}, out, !a.Cooperative())
		}
	})
}

func TestNames(t *testing.T) {
	if n, c := New().Name(), New().Cooperative(); n != "sticky" || c {
		t.Fatalf("New: %s %v", n, c)
	}
	if n, c := NewCooperative().Name(), NewCooperative().Cooperative(); n != "cooperative-sticky" || !c {
		t.Fatalf("NewCooperative: %s %v", n, c)
	}
}

// TestAssignEachMatchesAssign checks that the streamed plan is Assign's:
// every member once, in ID order within each worker, indexed into the
// caller's slice (also when that slice is not sorted), on one goroutine and
// on several; and that an error from emit stops it.
func TestAssignEachMatchesAssign(t *testing.T) {
	defer func(n int) { minPartsPerWorker = n }(minPartsPerWorker)
	minPartsPerWorker = 1 // let the small test groups use several goroutines
	for seed := 0; seed < 60; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		g := genGroup(rng, genOpts{maxMembers: 30, maxTopics: 8, maxParts: 40, mixed: seed%2 == 0, history: true, conflicts: seed%3 != 0})
		if seed%4 == 1 {
			rng.Shuffle(len(g.members), func(i, j int) { g.members[i], g.members[j] = g.members[j], g.members[i] })
		}
		for _, a := range []assign.Assignor{New(), NewCooperative()} {
			want := assignOrFatal(t, a, g)
			for _, workers := range []int{0, 1, 3} {
				var mu sync.Mutex
				got := map[string]assign.Assignment{}
				last := map[int]string{}
				err := a.(assign.Streamer).AssignEach(g.members, g.topics, workers, func(w, i int, as assign.Assignment) error {
					if w < 0 || w >= max(workers, 1) {
						t.Errorf("seed %d %s: worker %d of %d", seed, a.Name(), w, workers)
					}
					var c assign.Assignment
					for _, tp := range as.Partitions {
						c.Partitions = append(c.Partitions, assign.TopicPartitions{Topic: tp.Topic, Partitions: slices.Clone(tp.Partitions)})
					}
					mu.Lock()
					defer mu.Unlock()
					id := g.members[i].ID
					if _, dup := got[id]; dup || id <= last[w] {
						t.Errorf("seed %d %s: member %s emitted out of order or twice", seed, a.Name(), id)
					}
					last[w] = id
					got[id] = c
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d %s, %d workers: streamed plan differs from Assign's\n got %v\nwant %v", seed, a.Name(), workers, got, want)
				}
				stop := errors.New("stop")
				var calls atomic.Int32
				err = a.(assign.Streamer).AssignEach(g.members, g.topics, workers, func(int, int, assign.Assignment) error { calls.Add(1); return stop })
				if err != stop || int(calls.Load()) > max(workers, 1) {
					t.Fatalf("seed %d %s: emit's error gave %v after %d calls", seed, a.Name(), err, calls.Load())
				}
			}
		}
	}
}

package assign

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"
)

// classGroup builds a random rack-aware input that exercises the member
// classes: a few subscription sets shared by many members, members without a
// rack or without topics, topics without rack metadata, partitions with
// replicas in one to three of four racks, and some groups where one rack
// holds every replica (most units then go to the filling phase).
func classGroup(r *rand.Rand) ([]Member, map[string]Topic) {
	racks := []string{"r0", "r1", "r2", "r3"}
	topics := map[string]Topic{}
	var names []string
	skewed := r.IntN(4) == 0
	for i := range 1 + r.IntN(5) {
		name := fmt.Sprintf("t%d", i)
		names = append(names, name)
		tp := Topic{Name: name, Partitions: int32(r.IntN(150))}
		if r.IntN(5) > 0 {
			for range tp.Partitions {
				var rs []string
				for range 1 + r.IntN(3) {
					if skewed {
						rs = append(rs, racks[0])
					} else {
						rs = append(rs, racks[r.IntN(len(racks))])
					}
				}
				tp.Racks = append(tp.Racks, rs)
			}
		}
		topics[name] = tp
	}
	var sets [][]string
	for range 1 + r.IntN(3) {
		var ts []string
		for _, t := range names {
			if r.IntN(3) > 0 {
				ts = append(ts, t)
			}
		}
		if r.IntN(4) == 0 {
			ts = append(ts, "no-such-topic")
		}
		sets = append(sets, ts)
	}
	var ms []Member
	for i := range 1 + r.IntN(40) {
		m := Member{ID: fmt.Sprintf("m%02d-%x", i, r.Uint32()), Topics: sets[r.IntN(len(sets))], Generation: -1}
		if len(m.Topics) == 0 {
			m.Topics = []string{names[0]}
		}
		if r.IntN(6) > 0 {
			m.Rack = racks[r.IntN(len(racks))]
		}
		if r.IntN(2) == 0 { // claims, for redundant's preference
			m.Generation = int32(r.IntN(4))
			for _, t := range m.Topics {
				var ps []int32
				for p := range topics[t].Partitions {
					if r.IntN(4) == 0 {
						ps = append(ps, p)
					}
				}
				if ps != nil {
					m.Owned = append(m.Owned, TopicPartitions{Topic: t, Partitions: ps})
				}
			}
		}
		ms = append(ms, m)
	}
	return ms, topics
}

// TestMemberClassesChooseAsTheScans: the engine with member classes makes
// exactly the plan it makes by visiting every candidate and every member
// (the classes only find the same member faster), phase by phase, on random
// groups, for rack-aware and for redundant(2) and (3).
func TestMemberClassesChooseAsTheScans(t *testing.T) {
	const n = 2000
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, a := range []struct {
		name  string
		build func([]Member, map[string]Topic) ([]Member, *engine, error)
	}{
		{"rack-aware", rackAware{simple{RackAwareName}}.engine},
		{"redundant(2)", redundant{simple: simple{RedundantName}, replicas: 2, log: quiet}.engine},
		{"redundant(3)", redundant{simple: simple{RedundantName}, replicas: 3, log: quiet}.engine},
	} {
		withFill := 0
		for seed := range uint64(n) {
			r := rand.New(rand.NewPCG(seed, 848))
			members, topics := classGroup(r)
			ms, fast, err := a.build(members, topics)
			if err != nil {
				t.Fatal(err)
			}
			_, slow, _ := a.build(members, topics)
			if fast.classes == nil {
				t.Fatalf("%s built no member classes", a.name)
			}
			slow.classes = nil
			fast.preferPhase()
			slow.preferPhase()
			if !reflect.DeepEqual(fast.plan().result(ms), slow.plan().result(ms)) {
				t.Fatalf("%s, seed %d: after the preferring phase the classes chose otherwise than the scan", a.name, seed)
			}
			before := 0
			for _, u := range fast.units {
				before += len(u.owners)
			}
			fast.fillPhase()
			slow.fillPhase()
			after := 0
			for _, u := range fast.units {
				after += len(u.owners)
			}
			if after > before {
				withFill++
			}
			if !reflect.DeepEqual(fast.plan().result(ms), slow.plan().result(ms)) {
				t.Fatalf("%s, seed %d: after the filling phase the classes chose otherwise than the scan", a.name, seed)
			}
		}
		// The filling phase must have had work in many of the groups, or
		// the comparison above says little about it.
		if withFill < n/4 {
			t.Fatalf("%s: the filling phase placed units in only %d of %d groups", a.name, withFill, n)
		}
	}
}

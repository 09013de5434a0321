package assign_test

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
)

func TestCopartitionKeepsPartitionsTogether(t *testing.T) {
	a := assign.Copartition([]string{"clicks", "views"})
	members := []assign.Member{sub("b", "clicks", "views", "logs"), sub("a", "clicks", "views"), sub("c", "clicks", "logs")}
	res, err := a.Assign(members, meta(map[string]int32{"clicks": 4, "views": 4, "logs": 3}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		// c subscribes to clicks but not views: it gets none of the set.
		"a": {"clicks-0", "clicks-1", "views-0", "views-1"},
		"b": {"clicks-2", "clicks-3", "logs-0", "logs-1", "views-2", "views-3"},
		"c": {"logs-2"},
	}
	if got := flat(res); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func TestCopartitionMergesOverlappingSets(t *testing.T) {
	a := assign.Copartition([]string{"a", "b"}, []string{"b", "c"}, nil)
	members := []assign.Member{sub("m1", "a", "b", "c"), sub("m2", "a", "b", "c"), sub("m3", "a", "b", "c")}
	res, err := a.Assign(members, meta(map[string]int32{"a": 3, "b": 3, "c": 3}))
	if err != nil {
		t.Fatal(err)
	}
	for id, parts := range flat(res) {
		// Each member owns the same index in all three topics.
		if len(parts) != 3 || parts[0][2:] != parts[1][2:] || parts[1][2:] != parts[2][2:] {
			t.Errorf("%s: %v", id, parts)
		}
	}
}

func TestCopartitionErrors(t *testing.T) {
	a := assign.Copartition([]string{"left", "right"})
	_, err := a.Assign([]assign.Member{sub("m", "left", "right")}, meta(map[string]int32{"left": 4, "right": 6}))
	if err == nil || !strings.Contains(err.Error(), "left=4") || !strings.Contains(err.Error(), "right=6") {
		t.Errorf("mismatched counts: err = %v, want one naming left=4 and right=6", err)
	}
	_, err = a.Assign([]assign.Member{sub("m1", "left"), sub("m2", "right")}, meta(map[string]int32{"left": 2, "right": 2}))
	if err == nil || !strings.Contains(err.Error(), "no member subscribes to all") || !strings.Contains(err.Error(), "subscribe the members") {
		t.Errorf("split subscriptions: err = %v", err)
	}
	// A set topic nobody subscribes to does not constrain the others.
	res, err := a.Assign([]assign.Member{sub("m1", "left")}, meta(map[string]int32{"left": 2, "right": 5}))
	if err != nil || len(flat(res)["m1"]) != 2 {
		t.Errorf("unsubscribed partner: %v, %v", res, err)
	}
}

func TestRedundantFewerMembersThanReplicasWarns(t *testing.T) {
	var buf bytes.Buffer
	a := assign.Redundant(3, slog.New(slog.NewTextHandler(&buf, nil)))
	res, err := a.Assign([]assign.Member{sub("a", "t"), sub("b", "t")}, meta(map[string]int32{"t": 2}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"a": {"t-0", "t-1"}, "b": {"t-0", "t-1"}}
	if got := flat(res); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "topic=t") {
		t.Errorf("no warning logged: %q", buf.String())
	}
	if _, err := assign.Redundant(0, nil).Assign(nil, nil); err == nil {
		t.Error("replicas 0 accepted")
	}
}

func TestRedundantIsSticky(t *testing.T) {
	owned := func(m assign.Member, gen int32, parts ...int32) assign.Member {
		m.Owned = []assign.TopicPartitions{{Topic: "t", Partitions: parts}}
		m.Generation = gen
		return m
	}
	// Generation 5: a and b each own all four partitions (R=2). c joins.
	members := []assign.Member{owned(sub("a", "t"), 5, 0, 1, 2, 3), owned(sub("b", "t"), 5, 0, 1, 2, 3), sub("c", "t")}
	res, err := assign.Redundant(2, quiet()).Assign(members, meta(map[string]int32{"t": 4}))
	if err != nil {
		t.Fatal(err)
	}
	got := flat(res)
	kept := 0
	for _, id := range []string{"a", "b"} {
		for _, p := range got[id] {
			if strings.HasPrefix(p, "t-") {
				kept++
			}
		}
	}
	// 8 replicas over 3 members: 3,3,2. The minimum movement keeps 6.
	if kept != 6 || len(got["c"]) != 2 {
		t.Errorf("kept %d of the old replicas, c got %v: %v", kept, got["c"], got)
	}
	// A stale claim (older generation) loses to the current owners.
	members = []assign.Member{owned(sub("a", "t"), 7, 0), owned(sub("b", "t"), 7, 0), owned(sub("c", "t"), 3, 0)}
	res, err = assign.Redundant(2, quiet()).Assign(members, meta(map[string]int32{"t": 1}))
	if err != nil {
		t.Fatal(err)
	}
	if got := flat(res); len(got["a"]) != 1 || len(got["b"]) != 1 || len(got["c"]) != 0 {
		t.Errorf("stale claim won: %v", got)
	}
}

func TestRackAwarePrefersLocalReplicas(t *testing.T) {
	racks := []string{"r0", "r1", "r2"}
	var members []assign.Member
	for i, id := range []string{"a", "b", "c", "d", "e", "f"} {
		m := sub(id, "t")
		m.Rack = racks[i%3]
		members = append(members, m)
	}
	topic := assign.Topic{Name: "t", Partitions: 12}
	for p := 0; p < 12; p++ {
		// Each partition has its replicas in one rack, rotating.
		topic.Racks = append(topic.Racks, []string{racks[(p*7)%3]})
	}
	res, err := assign.RackAware().Assign(members, map[string]assign.Topic{"t": topic})
	if err != nil {
		t.Fatal(err)
	}
	rackOf := map[string]string{}
	for _, m := range members {
		rackOf[m.ID] = m.Rack
	}
	for id, a := range res {
		n := 0
		for _, tp := range a.Partitions {
			for _, p := range tp.Partitions {
				n++
				if topic.Racks[p][0] != rackOf[id] {
					t.Errorf("%s (rack %s) got t-%d with replicas in %v", id, rackOf[id], p, topic.Racks[p])
				}
			}
		}
		if n != 2 {
			t.Errorf("%s got %d partitions, want 2", id, n)
		}
	}
}

func TestRackAwareKeepsBalanceOverLocality(t *testing.T) {
	// All replicas live in r0, where only one of three members runs.
	members := []assign.Member{sub("a", "t"), sub("b", "t"), sub("c", "t")}
	members[0].Rack, members[1].Rack, members[2].Rack = "r0", "r1", "r2"
	topic := assign.Topic{Name: "t", Partitions: 6}
	for p := 0; p < 6; p++ {
		topic.Racks = append(topic.Racks, []string{"r0"})
	}
	res, err := assign.RackAware().Assign(members, map[string]assign.Topic{"t": topic})
	if err != nil {
		t.Fatal(err)
	}
	for id, parts := range flat(res) {
		if len(parts) != 2 {
			t.Errorf("%s got %v, want 2 partitions", id, parts)
		}
	}
}

func TestRackAwareWithoutRacksIsPlainBalanced(t *testing.T) {
	members := []assign.Member{sub("a", "t", "u"), sub("b", "t", "u"), sub("c", "t")}
	topics := meta(map[string]int32{"t": 5, "u": 4})
	res, err := assign.RackAware().Assign(members, topics)
	if err != nil {
		t.Fatal(err)
	}
	// Racks on members only (no replica racks) change nothing.
	for i := range members {
		members[i].Rack = "r1"
	}
	res2, err := assign.RackAware().Assign(members, topics)
	if err != nil || !reflect.DeepEqual(res, res2) {
		t.Errorf("member racks without replica racks changed the result: %v vs %v (%v)", flat(res), flat(res2), err)
	}
	n := map[string]int{}
	for id, parts := range flat(res) {
		n[id] = len(parts)
	}
	if n["a"] != 3 || n["b"] != 3 || n["c"] != 3 {
		t.Errorf("loads %v, want 3 each", n)
	}
}

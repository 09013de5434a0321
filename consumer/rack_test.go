package consumer_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
)

// rackSpy records what the leader's assignor was given last.
type rackSpy struct {
	assign.Assignor
	mu      sync.Mutex
	members []assign.Member
	topics  map[string]assign.Topic
}

func (s *rackSpy) Assign(ms []assign.Member, md map[string]assign.Topic) (map[string]assign.Assignment, error) {
	s.mu.Lock()
	s.members, s.topics = slices.Clone(ms), md
	s.mu.Unlock()
	return s.Assignor.Assign(ms, md)
}

// TestGroupRackAware: against kfake, whose brokers all sit in rack "krack",
// the leader's rack-aware assignor sees every partition's replica racks
// (from Metadata) and every member's own rack (from its subscription), and
// the group still splits the partitions evenly.
func TestGroupRackAware(t *testing.T) {
	addr := membertest.StartKfake(t, kfake.SeedTopics(6, "events"))
	o := newOwners()
	var spies []*rackSpy
	for _, m := range []struct{ name, rack string }{{"a", "krack"}, {"b", "elsewhere"}} {
		spy := &rackSpy{Assignor: assign.RackAware()}
		spies = append(spies, spy)
		g, err := consumer.StartGroup(consumer.GroupConfig{
			Member: member.Config{
				Group: "racks", SessionTimeout: session, RebalanceTimeout: 3 * time.Second, HeartbeatInterval: session / 5,
				Logger: membertest.Logger(t).With("consumer", m.name),
			},
			Client:    membertest.Client(t, addr),
			Topics:    []string{"events"},
			Assignors: []assign.Assignor{spy},
			Rack:      m.rack,
			Assigned: func(_ context.Context, _ member.Generation, added []assign.TopicPartitions) {
				o.add(m.name, added)
			},
			Revoked: func(tps []assign.TopicPartitions) { o.remove(m.name, tps) },
			Lost:    func(tps []assign.TopicPartitions) { o.remove(m.name, tps) },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Abandon)
	}
	o.waitSplit(t, []string{"a", "b"}, 3)
	var seen bool
	for _, s := range spies {
		s.mu.Lock()
		ms, md := s.members, s.topics
		s.mu.Unlock()
		if len(ms) != 2 {
			continue // not the leader of the two-member generation
		}
		seen = true
		var racks []string
		for _, m := range ms {
			racks = append(racks, m.Rack)
		}
		slices.Sort(racks)
		if !slices.Equal(racks, []string{"elsewhere", "krack"}) {
			t.Errorf("member racks %v", racks)
		}
		ev := md["events"]
		if ev.Partitions != 6 || len(ev.Racks) != 6 {
			t.Fatalf("events metadata %+v", ev)
		}
		for p, r := range ev.Racks {
			if !slices.Equal(r, []string{"krack"}) {
				t.Errorf("partition %d replica racks %v, want [krack]", p, r)
			}
		}
	}
	if !seen {
		t.Fatal("no assignor saw the two-member group")
	}
}

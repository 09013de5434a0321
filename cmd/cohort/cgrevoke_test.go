package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeMemberStillRevoking: a consumer-protocol member that has been
// told to give partitions up (its heartbeat answered with a smaller
// assignment) but has not yet acknowledged the revocation still holds them,
// and the others wait for it. describe must show them in its CURRENT and
// TO-REVOKE: ConsumerGroupDescribe's assignment leaves them out (as Kafka's
// does), so they come from cohort's tag on the member. Before, the member read
// as holding exactly its target with nothing to revoke, while the group
// waited for it: the slow member of a stuck reconciliation looked innocent.
func TestDescribeMemberStillRevoking(t *testing.T) {
	n := startNodeWith(t, "127.0.0.1:0", func(cfg *group.Config) { cfg.ConsumerHeartbeatInterval = 250 * time.Millisecond })
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "work", "--partitions", "4")

	raw, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ClientID("slow"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = "rv", "slow-member-0001", 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = 60000, []string{"work"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := heartbeat(t, raw, hb)
	if resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || len(resp.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("the first member's assignment: %+v", resp.Assignment)
	}
	tid := resp.Assignment.Topics[0].TopicID
	c.waitConsumer("rv", "stable with the slow member", func(g groupDesc) bool { return settled(g, 1, 4) })

	// A second member joins; the slow one heartbeats, still owning all
	// four, and is told to keep only its share: it is now revoking.
	_, stop := member848(t, n.Addr(), "rv", "work", "app-a", "", "")
	t.Cleanup(stop)
	c.waitConsumer("rv", "a target for app-a", func(g groupDesc) bool {
		return slices.ContainsFunc(g.Members, func(m memberDesc) bool { return m.ClientID == "app-a" && len(m.Target) > 0 })
	})
	hb.MemberEpoch, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = resp.MemberEpoch, -1, nil
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: tid, Partitions: []int32{0, 1, 2, 3}}}
	resp = heartbeat(t, raw, hb)
	if resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || len(resp.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("the slow member was not told to give two partitions up: %+v", resp.Assignment)
	}
	kept := resp.Assignment.Topics[0].Partitions

	g := c.describeOne("rv")
	slow := member(t, g, "slow-member-0001")
	var gone []string
	for p := int32(0); p < 4; p++ {
		if !slices.Contains(kept, p) {
			gone = append(gone, fmt.Sprintf("work:%d", p))
		}
	}
	if !slices.Equal(flat(slow.Assignment), []string{"work:0", "work:1", "work:2", "work:3"}) ||
		!slices.Equal(flat(slow.Revoking), gone) {
		t.Fatalf("the member told to revoke %v: current %v, to revoke %v; want all four current and %v to revoke",
			gone, flat(slow.Assignment), flat(slow.Revoking), gone)
	}
	out := table(c.ok("group", "describe", "rv", "--members"))
	if want := "rv slow-member-0001 - slow 127.0.0.1 - "; !strings.Contains(out, want) ||
		!strings.Contains(out, "work(0,1,2,3) "+partitionsText(slow.Revoking)+" "+partitionsText(slow.Target)) {
		t.Fatalf("describe --members does not show what the slow member still holds:\n%s", out)
	}
}

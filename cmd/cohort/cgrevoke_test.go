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

	// A second member joins; the slow one heartbeats, still owning all
	// four, and is told to keep only its share: it is now revoking.
	raw, hb := slowAndAppA(t, c, n.Addr(), "rv", "slow", "slow-member-0001", 60000)
	resp := heartbeat(t, raw, hb)
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

// TestHistoryRevokeWaitNamed: a consumer-protocol member told to give
// partitions up that never does (rebalance timeout 1 s) is fenced, and the
// rebalance it held up ends when the other member has the whole topic. The
// history must say that the time before the last target went to that
// member's revocation: WAITED-FOR names it (revoke, evicted), JOIN says how
// much of it an earlier target was in force, and why does not read as a
// target computed late. Before, the slow member was only under EVICTED and
// why said "The target assignment was computed after 1.x s".
func TestHistoryRevokeWaitNamed(t *testing.T) {
	n := startNodeWith(t, "127.0.0.1:0", func(cfg *group.Config) { cfg.ConsumerHeartbeatInterval = 250 * time.Millisecond })
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "work", "--partitions", "4")
	const slow = "slowC-member-0001"
	raw, hb := slowAndAppA(t, c, n.Addr(), "rw", "slowC", slow, 1000)
	// Told to give two up; it never answers again and is fenced 1 s later.
	if resp := heartbeat(t, raw, hb); resp.Assignment == nil || len(resp.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("the slow member was not told to give two partitions up: %+v", resp.Assignment)
	}
	doc := c.awaitHistory("rw", "the slow member's eviction recorded", func(d group.HistoryDoc) bool {
		return slices.ContainsFunc(d.History, func(e group.RebalanceEvent) bool { return slices.Contains(e.Evicted, slow) })
	})
	ev := doc.History[slices.IndexFunc(doc.History, func(e group.RebalanceEvent) bool { return slices.Contains(e.Evicted, slow) })]
	if ev.EarlierTargetMs < 1000 || ev.EarlierTargetMs > ev.JoinMs ||
		!slices.ContainsFunc(ev.WaitedFor, func(w group.Wait) bool {
			return w.MemberID == slow && w.Phase == "revoke" && w.Evicted && w.WaitedMs >= 1000
		}) {
		t.Fatalf("the event does not say it waited for %s to revoke: %+v", slow, ev)
	}
	tbl := table(c.ok("group", "history", "rw"))
	wantIn(t, "history", tbl, slow+"(revoke ", " evicted)", "(earlier-targets ")
	why := c.ok("group", "why", "rw", "--last", "100")
	wantIn(t, "why", why, "the members were reconciling to earlier targets, which bumps it took in replaced, waiting for "+slow+" (revoke, ",
		", then evicted).", fmt.Sprintf("The last target assignment, at group epoch %d, was computed ", ev.Generation))
}

// slowAndAppA starts group grp on topic work (4 partitions): a raw member
// (client id client, member id, rebalance timeout ms) that takes all four,
// then a franz-go member app-a once it has a target. It returns the raw
// member's client and its next heartbeat, listing all four as owned: sent,
// it is told to give two up.
func slowAndAppA(t *testing.T, c cli, addr, grp, client, id string, rebalanceMs int32) (*kgo.Client, *kmsg.ConsumerGroupHeartbeatRequest) {
	t.Helper()
	raw, hb, resp := joinRaw848(t, addr, grp, client, id, rebalanceMs)
	if resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || len(resp.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("the first member's assignment: %+v", resp.Assignment)
	}
	tid := resp.Assignment.Topics[0].TopicID
	c.waitConsumer(grp, "stable with the slow member", func(g groupDesc) bool { return settled(g, 1, 4) })
	_, stop := member848(t, addr, grp, "work", "app-a", "", "")
	t.Cleanup(stop)
	c.waitConsumer(grp, "a target for app-a", func(g groupDesc) bool {
		return slices.ContainsFunc(g.Members, func(m memberDesc) bool { return m.ClientID == "app-a" && len(m.Target) > 0 })
	})
	hb.MemberEpoch, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = resp.MemberEpoch, -1, nil
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: tid, Partitions: []int32{0, 1, 2, 3}}}
	return raw, hb
}

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// member848 starts a franz-go consumer of topic in group grp that uses the
// consumer group protocol (KIP-848: ConsumerGroupHeartbeat, server-side
// assignment), without auto-commit; it polls until the test ends or the
// returned function closes it (a leave).
func member848(t *testing.T, addr, grp, topic, clientID, instanceID, rack string) (*kgo.Client, func()) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic), kgo.ClientID(clientID),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200 * time.Millisecond)}
	if instanceID != "" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	if rack != "" {
		opts = append(opts, kgo.Rack(rack))
	}
	return polling(t, opts...)
}

// waitConsumer polls "group describe ID --state" (JSON, bounded) until ok
// says the group is as wanted, and returns it.
func (c cli) waitConsumer(id, what string, ok func(groupDesc) bool) groupDesc {
	c.t.Helper()
	var d describeJSON
	var out, errOut string
	var code int
	if !testwait.Until(20*time.Second, func() bool {
		d = describeJSON{}
		out, errOut, code = c.run("group", "describe", id, "--state", "--output", "json")
		return code == 0 && decodeStrict(out, &d) == nil && len(d.Groups) == 1 && ok(d.Groups[0])
	}) {
		c.t.Fatalf("group %s: not %s after 20s: exit %d\n%s%s", id, what, code, out, errOut)
	}
	return d.Groups[0]
}

// settled reports whether g is a Stable consumer group of n members whose
// current assignments are their targets at the assignment epoch, covering
// parts partitions.
func settled(g groupDesc, n, parts int) bool {
	if g.Type != "consumer" || g.State != "Stable" || g.MemberCount != n || g.AssignmentEpoch == nil {
		return false
	}
	total := 0
	for _, m := range g.Members {
		if m.MemberEpoch == nil || *m.MemberEpoch != *g.AssignmentEpoch || len(m.Revoking) != 0 ||
			partitionsText(m.Assignment) != partitionsText(m.Target) {
			return false
		}
		total += len(flat(m.Assignment))
	}
	return total == parts
}

// flat lists tps as topic:partition strings, in order.
func flat(tps []topicPartitions) []string {
	var out []string
	for _, t := range tps {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s:%d", t.Topic, p))
		}
	}
	return out
}

// member returns g's member with client id (or member id) who.
func member(t *testing.T, g groupDesc, who string) memberDesc {
	t.Helper()
	for _, m := range g.Members {
		if m.ClientID == who || m.MemberID == who {
			return m
		}
	}
	t.Fatalf("group %s has no member %s: %+v", g.Group, who, g.Members)
	return memberDesc{}
}

// heartbeat sends one ConsumerGroupHeartbeat and fails the test on an error.
func heartbeat(t *testing.T, cl *kgo.Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("heartbeat of %s at epoch %d: %v", req.MemberID, req.MemberEpoch, err)
	}
	return resp
}

// TestConsumerGroupCommands: the commands on a KIP-848 consumer group of a
// live node: groups shows its type and filters by it; group describe uses
// ConsumerGroupDescribe and shows epochs, assignor, members with their
// current assignment, what they still have to revoke and their target
// (caught in the middle of a reconciliation with a hand-driven member),
// offsets and lag; offsets reset refuses a group with members; an empty
// consumer group can be reset and deleted.
func TestConsumerGroupCommands(t *testing.T) {
	n := startNodeWith(t, "127.0.0.1:0", func(cfg *group.Config) { cfg.ConsumerHeartbeatInterval = 250 * time.Millisecond })
	data := startData(t, 3, "work")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "work", "--partitions", "3")
	data.produce(t, "work", 0, 10, time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	data.produce(t, "work", 1, 5, time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	commit(t, n.Addr(), "idle", "work", map[int32]int64{0: 1}) // a classic group

	// A hand-driven member joins first and is given every partition.
	raw, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ClientID("hand"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = "g848", "hand-member-0001", 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = 60000, []string{"work"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := heartbeat(t, raw, hb)
	if resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || len(resp.Assignment.Topics[0].Partitions) != 3 {
		t.Fatalf("the first member's assignment: %+v", resp.Assignment)
	}
	handEpoch := resp.MemberEpoch
	g := c.waitConsumer("g848", "stable with the hand-driven member", func(g groupDesc) bool { return settled(g, 1, 3) })
	if *g.GroupEpoch != handEpoch || *g.AssignmentEpoch != handEpoch {
		t.Fatalf("epochs %d/%d, the member's %d", *g.GroupEpoch, *g.AssignmentEpoch, handEpoch)
	}

	// A franz-go member joins: the target moves partitions to it, but the
	// hand-driven member does not heartbeat, so it still holds them all.
	c.ok("group", "describe", "g848", "--state") // (a table of a consumer group alone)
	clA, stopA := member848(t, n.Addr(), "g848", "work", "app-a", "inst-a", "rack-1")
	g = c.waitConsumer("g848", "reconciling with a target for app-a", func(g groupDesc) bool {
		return g.MemberCount == 2 && slices.ContainsFunc(g.Members, func(m memberDesc) bool { return m.ClientID == "app-a" && len(m.Target) > 0 })
	})
	if g.State != "Reconciling" || *g.GroupEpoch <= handEpoch || *g.AssignmentEpoch != *g.GroupEpoch {
		t.Fatalf("while reconciling: state %s, epochs %d/%d (hand's %d)", g.State, *g.GroupEpoch, *g.AssignmentEpoch, handEpoch)
	}
	hand, a := member(t, g, "hand-member-0001"), member(t, g, "app-a")
	allParts := []string{"work:0", "work:1", "work:2"}
	if *hand.MemberEpoch != handEpoch || !slices.Equal(flat(hand.Assignment), allParts) || len(hand.Revoking) == 0 ||
		!slices.Equal(flat(hand.Revoking), flat(minus(hand.Assignment, hand.Target))) || len(hand.Target) == 0 {
		t.Fatalf("the member that must revoke: %+v", hand)
	}
	// app-a waits for the partitions hand still holds: nothing current yet,
	// and its target is exactly what hand has to revoke.
	if len(a.Assignment) != 0 || len(a.Revoking) != 0 || !slices.Equal(flat(a.Target), flat(hand.Revoking)) {
		t.Fatalf("the new member: %+v; hand revokes %v", a, flat(hand.Revoking))
	}
	out := table(c.ok("group", "describe", "g848", "--members"))
	for _, want := range []string{
		"GROUP MEMBER-ID INSTANCE-ID CLIENT-ID HOST RACK MEMBER-EPOCH SUBSCRIPTION CURRENT TO-REVOKE TARGET LAST-HEARD\n",
		fmt.Sprintf("g848 hand-member-0001 - hand 127.0.0.1 - %d work work(0,1,2) %s %s", handEpoch,
			partitionsText(hand.Revoking), partitionsText(hand.Target)),
		fmt.Sprintf(" inst-a app-a 127.0.0.1 rack-1 %d work - - %s", *a.MemberEpoch, partitionsText(a.Target)),
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe --members lacks %q:\n%s", want, out)
		}
	}

	// hand acknowledges by heartbeating with what it kept, then leaves:
	// app-a ends up with everything.
	hb.MemberEpoch, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = handEpoch, -1, nil
	hb.Topics = nil
	for _, tps := range hand.Target {
		var tid [16]byte
		if resp.Assignment != nil && len(resp.Assignment.Topics) > 0 {
			tid = resp.Assignment.Topics[0].TopicID
		}
		hb.Topics = append(hb.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tid, Partitions: tps.Partitions})
	}
	heartbeat(t, raw, hb)
	c.waitConsumer("g848", "stable with two members", func(g groupDesc) bool { return settled(g, 2, 3) })
	hb.MemberEpoch, hb.Topics = -1, nil
	heartbeat(t, raw, hb)
	_, stopB := member848(t, n.Addr(), "g848", "work", "app-b", "", "")
	g = c.waitConsumer("g848", "stable with app-a and app-b", func(g groupDesc) bool {
		return settled(g, 2, 3) && member(t, g, "app-b").ClientID == "app-b"
	})

	// groups: the type column and filter.
	if out := table(c.ok("groups")); !strings.Contains(out, "GROUP STATE TYPE PROTOCOL-TYPE\ng848 Stable consumer consumer\nidle Empty classic -") {
		t.Fatalf("groups:\n%s", out)
	}
	if l := c.listGroups("--type", "consumer"); len(l) != 1 || l[0] != (listedGroupJSON{Group: "g848", State: "Stable", Type: "consumer", ProtocolType: "consumer"}) {
		t.Fatalf("groups --type consumer: %+v", l)
	}
	if l := c.listGroups("--type", "CLASSIC"); len(l) != 1 || l[0].Group != "idle" {
		t.Fatalf("groups --type classic: %+v", l)
	}

	// describe: the consumer group's own fields, and classic ones null.
	if g.Coordinator == nil || g.Coordinator.String() != n.Addr()+" (node 0)" || g.ProtocolType != "consumer" || g.Protocol != "" ||
		g.Generation != nil || g.Leader != nil || g.Assignor == nil || *g.Assignor != "uniform" || *g.GroupEpoch != *g.AssignmentEpoch {
		t.Fatalf("g848: %+v", g)
	}
	a, b := member(t, g, "app-a"), member(t, g, "app-b")
	if a.InstanceID == nil || *a.InstanceID != "inst-a" || a.Rack == nil || *a.Rack != "rack-1" || b.InstanceID != nil || b.Rack != nil {
		t.Fatalf("instance ids and racks: %+v %+v", a, b)
	}
	for _, m := range g.Members {
		if m.MemberType != "consumer" || m.Host != "127.0.0.1" || !slices.Equal(m.SubscribedTopics, []string{"work"}) ||
			m.SubscribedTopicRegex != nil || m.AssignmentBytes != 0 || len(m.Assignment) == 0 {
			t.Fatalf("member %+v", m)
		}
	}
	out = table(c.ok("group", "describe", "g848", "--state"))
	if want := fmt.Sprintf("GROUP COORDINATOR TYPE STATE ASSIGNOR GROUP-EPOCH ASSIGNMENT-EPOCH MEMBERS\ng848 %s (node 0) consumer Stable uniform %d %d 2",
		n.Addr(), *g.GroupEpoch, *g.AssignmentEpoch); out != want {
		t.Fatalf("describe --state:\n%s\nwant\n%s", out, want)
	}

	// Offsets and lag: app-a commits (at its member epoch); every row names
	// the member that holds the partition.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var commitErr error
	clA.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"work": {0: {Epoch: -1, Offset: 4}, 1: {Epoch: -1, Offset: 5}, 2: {Epoch: -1, Offset: 0}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if commitErr == nil {
						commitErr = kerr.ErrorForCode(p.ErrorCode)
					}
				}
			}
		})
	if commitErr != nil {
		t.Fatalf("app-a's commit: %v", commitErr)
	}
	g = c.describeOne("g848", "--data-bootstrap", data.addr)
	owner := map[string]string{}
	for _, m := range g.Members {
		for _, tp := range flat(m.Assignment) {
			owner[tp] = m.MemberID
		}
	}
	if len(g.Offsets) != 3 || g.TotalLag == nil || *g.TotalLag != 6 {
		t.Fatalf("offsets %+v, total lag %v; want 3 rows, lag 6", g.Offsets, g.TotalLag)
	}
	for i, r := range g.Offsets {
		want := []int64{6, 0, 0}[i]
		if r.Lag == nil || *r.Lag != want || r.MemberID == nil || *r.MemberID != owner[fmt.Sprintf("work:%d", r.Partition)] {
			t.Fatalf("row %+v: want lag %d, owner %s", r, want, owner[fmt.Sprintf("work:%d", r.Partition)])
		}
	}
	out = table(c.ok("group", "describe", "g848", "--offsets", "--data-bootstrap", data.addr))
	if !strings.Contains(out, "g848 work 0 4 10 6 "+owner["work:0"]+" 127.0.0.1 ") || !strings.HasSuffix(out, "total lag of g848: 6") {
		t.Fatalf("describe --offsets:\n%s", out)
	}

	// --all-groups: a classic and a consumer group, each with its tables.
	var all describeJSON
	c.jsonOf(&all, "group", "describe", "--all-groups")
	if len(all.Groups) != 2 || all.Groups[0].Type != "consumer" || all.Groups[1].Group != "idle" || all.Groups[1].Type != "classic" ||
		all.Groups[1].GroupEpoch != nil || all.Groups[1].Assignor != nil {
		t.Fatalf("--all-groups: %+v", all)
	}
	out = table(c.ok("group", "describe", "--all-groups", "--state", "--members"))
	for _, want := range []string{
		"GROUP COORDINATOR STATE PROTOCOL-TYPE PROTOCOL GENERATION LEADER MEMBERS\nidle ",
		"GROUP COORDINATOR TYPE STATE ASSIGNOR GROUP-EPOCH ASSIGNMENT-EPOCH MEMBERS\ng848 ",
		"GROUP MEMBER-ID INSTANCE-ID CLIENT-ID HOST PARTITIONS ASSIGNMENT LAST-HEARD\n\n",
		"GROUP MEMBER-ID INSTANCE-ID CLIENT-ID HOST RACK MEMBER-EPOCH SUBSCRIPTION CURRENT TO-REVOKE TARGET LAST-HEARD\ng848 ",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("--all-groups lacks %q:\n%s", want, out)
		}
	}

	// A consumer group with members is not reset, nor deleted.
	c.fails(1, []string{"offsets", "reset", "g848", "--all-topics", "--to-offset", "0"},
		"reset g848: the consumer group is Stable with 2 members; offsets can only be reset while it has none")
	c.fails(1, []string{"group", "delete", "g848"}, `delete g848: NON_EMPTY_GROUP: group "g848" is Stable with 2 members: only a group without members can be deleted`)
	// The dry run says it in the same words as the node's refusal (it once read "The group is not empty.: it is").
	c.fails(1, []string{"group", "delete", "g848", "--dry-run"}, `delete g848: NON_EMPTY_GROUP: group "g848" is Stable with 2 members: only a group without members can be deleted`)

	// app-b leaves; app-a is static, so its leave (epoch -2) keeps it in
	// the group, holding its partitions, until its session runs out or its
	// instance id comes back (as Kafka does): the group still has a member.
	stopB()
	stopA()
	g = c.waitConsumer("g848", "left by app-b", func(g groupDesc) bool { return g.MemberCount == 1 })
	if a = member(t, g, "app-a"); *a.MemberEpoch != -2 {
		t.Fatalf("the static member after its leave: %+v", a)
	}
	c.fails(1, []string{"offsets", "reset", "g848", "--all-topics", "--to-offset", "0"}, "the consumer group is "+g.State+" with 1 member;")

	// A consumer group whose dynamic member left is empty: it is reset,
	// then deleted.
	_, stopSolo := member848(t, n.Addr(), "solo", "work", "app-s", "", "")
	c.waitConsumer("solo", "stable", func(g groupDesc) bool { return settled(g, 1, 3) })
	stopSolo()
	g = c.waitConsumer("solo", "empty", func(g groupDesc) bool { return g.MemberCount == 0 })
	if g.Type != "consumer" || g.State != "Empty" || len(g.Members) != 0 {
		t.Fatalf("after the member left: %+v", g)
	}
	c.ok("offsets", "reset", "solo", "--topic", "work:0", "--to-offset", "1", "--execute")
	if got := committed(t, n.Addr(), "solo", "work"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after the reset: %v", got)
	}
	c.ok("group", "delete", "solo")
	c.fails(1, []string{"group", "describe", "solo"}, "describe solo: GROUP_ID_NOT_FOUND")
}

// TestDescribeWithoutConsumerDescribe: against a server that does not have
// ConsumerGroupDescribe (kfake as Kafka 3.6), describe goes straight to
// DescribeGroups.
func TestDescribeWithoutConsumerDescribe(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"), kfake.MaxVersions(kversion.V3_6_0()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	addr := kc.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if hasConsumerDescribe(ctx, cl) {
		t.Fatal("kfake as Kafka 3.6 has ConsumerGroupDescribe?")
	}
	commit(t, addr, "old", "events", map[int32]int64{0: 3})
	k := cli{t: t, base: []string{"--bootstrap", addr}}
	g := k.describeOne("old")
	if g.Type != "classic" || g.State != "Empty" || len(g.Offsets) != 1 || *g.Offsets[0].CurrentOffset != 3 {
		t.Fatalf("old: %+v", g)
	}
}

// TestDescribeMixedGroupMemberType: while a classic group is upgraded by
// rolling its members to the consumer protocol, the consumer group has
// members of both kinds; the members table then ends with MEMBER-TYPE, and
// a consumer group whose members all speak the consumer protocol keeps the
// columns it always had (docs/cli.md).
func TestDescribeMixedGroupMemberType(t *testing.T) {
	n := startNodeWith(t, "127.0.0.1:0", func(cfg *group.Config) { cfg.ConsumerHeartbeatInterval = 250 * time.Millisecond })
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "work", "--partitions", "2")
	consumer(t, n.Addr(), "rolling", "work", "old", "") // a classic group
	member848(t, n.Addr(), "rolling", "work", "new", "", "")
	mixed := c.waitConsumer("rolling", "upgraded, with both members", func(g groupDesc) bool {
		return g.Type == "consumer" && settled(g, 2, 2)
	})
	if old, new := member(t, mixed, "old"), member(t, mixed, "new"); old.MemberType != "classic" || new.MemberType != "consumer" {
		t.Fatalf("member types: old %q, new %q", old.MemberType, new.MemberType)
	}
	member848(t, n.Addr(), "pure", "work", "solo", "", "")
	c.waitConsumer("pure", "stable", func(g groupDesc) bool { return settled(g, 1, 2) })

	head := "GROUP MEMBER-ID INSTANCE-ID CLIENT-ID HOST RACK MEMBER-EPOCH SUBSCRIPTION CURRENT TO-REVOKE TARGET LAST-HEARD"
	out := table(c.ok("group", "describe", "pure", "--members"))
	if !strings.HasPrefix(out, head+"\npure ") || strings.Contains(out, "MEMBER-TYPE") {
		t.Fatalf("a group of consumer-protocol members only:\n%s", out)
	}
	// Both groups in one table: the column is there for both.
	out = table(c.ok("group", "describe", "pure", "rolling", "--members"))
	lines := strings.Split(out, "\n")
	if len(lines) != 4 || lines[0] != head+" MEMBER-TYPE" {
		t.Fatalf("a table with a mixed group:\n%s", out)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		want := "consumer"
		if f[3] == "old" {
			want = "classic"
		}
		if f[len(f)-1] != want {
			t.Errorf("the member of client %s: MEMBER-TYPE %q, want %s:\n%s", f[3], f[len(f)-1], want, out)
		}
	}
}

package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// reconcile848 makes consumer group grp of the node at addr reconcile and
// stay so: two hand-driven members of topic (three partitions), the first
// given every partition, the second joining after it; neither heartbeats
// again, so the first has not revoked and the second waits for what the
// first holds ("why" then says when members hear of their target).
func reconcile848(t *testing.T, c cli, addr, grp, topic string, opts ...kgo.Opt) {
	t.Helper()
	raw, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	for i, id := range []string{"hand-member-0001", "hand-member-0002"} {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch = grp, id, 0
		hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = 60000, []string{topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp := heartbeat(t, raw, hb)
		// In a cluster the coordinator may not know the topic yet (it
		// learns the catalog from etcd): the first member heartbeats
		// again, as a client would, until its target names it.
		full := func() bool {
			return resp.Assignment != nil && len(resp.Assignment.Topics) == 1 && len(resp.Assignment.Topics[0].Partitions) == 3
		}
		if i == 0 && !full() && !testwait.Until(10*time.Second, func() bool {
			hb.MemberEpoch = resp.MemberEpoch
			resp = heartbeat(t, raw, hb)
			return full()
		}) {
			t.Fatalf("the first member's assignment: %+v", resp.Assignment)
		}
	}
	c.waitConsumer(grp, "reconciling", func(g groupDesc) bool { return g.State == "Reconciling" && g.MemberCount == 2 })
}

// TestWhyConsumerHeartbeatInterval: "group why" of a consumer group that
// waits for its members' heartbeats says the interval this group has, as
// the node reports it, and where it comes from: the node's flag, the
// group's own setting, the default; without DESCRIBE_CONFIGS on the group
// it gives the general rule.
func TestWhyConsumerHeartbeatInterval(t *testing.T) {
	const intro = "Members learn of a new target assignment only at their next heartbeat, which is why reaching it usually takes seconds:"
	const rest = " and once it has heard, cohort asks it to heartbeat every 500 ms or less until the group is Stable" +
		" (a classic-protocol member heartbeats at its client's heartbeat.interval.ms)."
	general := intro + " a member at rest heartbeats every consumer.heartbeat.interval.ms, 5 s by default" +
		" (the node's cohort serve --consumer-heartbeat-interval, or the group's own: cohort group config hb)," + rest
	once := func(what, out, want string) {
		t.Helper()
		if n := strings.Count(out, intro); n != 1 || !strings.Contains(out, want) {
			t.Fatalf("%s: want once\n%s\nin (%d times):\n%s", what, want, n, out)
		}
	}

	n := startNodeWith(t, "127.0.0.1:0", func(cfg *group.Config) { cfg.ConsumerHeartbeatInterval = 4 * time.Second })
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "work", "--partitions", "3")
	reconcile848(t, c, n.Addr(), "hb", "work")
	once("the node's flag", c.ok("group", "why", "hb"), intro+
		" a member at rest heartbeats every 4 s, the node's consumer.heartbeat.interval.ms (cohort serve --consumer-heartbeat-interval),"+
		" which this group does not set for itself,"+rest)
	c.ok("group", "config", "hb", "--set", "consumer.heartbeat.interval.ms=2550")
	once("the group's own", c.ok("group", "why", "hb"), intro+
		" a member at rest heartbeats every 2550 ms, this group's own consumer.heartbeat.interval.ms (cohort group config hb),"+rest)

	d := startNode(t, "127.0.0.1:0")
	c = cli{t: t, base: []string{"--bootstrap", d.Addr()}}
	c.ok("topic", "create", "work", "--partitions", "3")
	reconcile848(t, c, d.Addr(), "hb", "work")
	once("the default", c.ok("group", "why", "hb"), intro+
		" a member at rest heartbeats every 5 s, the default consumer.heartbeat.interval.ms, which neither this group nor the node sets,"+rest)

	// bob may describe the group and its topic, not the group's configs.
	addr, adminFlags := startSASLNode(t)
	admin := cli{t: t, base: adminFlags}
	admin.ok("topic", "create", "work", "--partitions", "3")
	if err := users(env{stdin: strings.NewReader("bob-pw"), stdout: io.Discard, stderr: io.Discard}, "user", append([]string{"set", "bob"}, adminFlags...)); err != nil {
		t.Fatal(err)
	}
	admin.ok("acl", "add", "--principal", "User:bob", "--operation", "describe", "--permission", "allow", "--group", "hb")
	admin.ok("acl", "add", "--principal", "User:bob", "--operation", "describe", "--permission", "allow", "--topic", "work")
	reconcile848(t, admin, addr, "hb", "work", kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha256Mechanism()))
	bob := cli{t: t, base: saslFlags(t, addr, "bob", "bob-pw")}
	if _, errOut, code := bob.run("group", "config", "hb"); code == 0 || !strings.Contains(errOut, "AUTHORIZATION_FAILED") {
		t.Fatalf("bob's group config: exit %d, %s", code, errOut)
	}
	once("refused", bob.ok("group", "why", "hb"), general)
}

// TestWhyConsumerHeartbeatIntervalCluster: in a cluster whose nodes were
// started with different heartbeat intervals, "why" names the interval of
// the node that coordinates the group, whichever node the command knows.
func TestWhyConsumerHeartbeatIntervalCluster(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ns []*node.Node
	for i, every := range []time.Duration{4 * time.Second, 3 * time.Second} { // node 1, node 2
		cfg := group.Defaults()
		cfg.InitialRebalanceDelay, cfg.ConsumerHeartbeatInterval = 0, every
		n, err := node.Start(node.Config{Listen: "127.0.0.1:0", NodeID: int32(i + 1), ClusterID: "test", Partitions: 4, Group: cfg,
			Logger: quiet, Cluster: &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/hb/", LeaseTTL: testLeaseTTL}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		ns = append(ns, n)
	}
	n1 := ns[0]
	g := groupOfNode2(t, n1)
	c := cli{t: t, base: []string{"--bootstrap", n1.Addr()}}
	c.ok("topic", "create", "work", "--partitions", "3")
	reconcile848(t, c, n1.Addr(), g, "work")
	// Asked several times: a request that any node may answer would
	// reach node 1 on some of them.
	for range 8 {
		if out := c.ok("group", "why", g); !strings.Contains(out, "a member at rest heartbeats every 3 s, the node's consumer.heartbeat.interval.ms") {
			t.Fatalf("why of %s, which node 2 (3 s) coordinates:\n%s", g, out)
		}
	}
}

package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// setGroupConfig sets group's name to value through cl's seed broker.
func setGroupConfig(ctx context.Context, t *testing.T, cl *kgo.Client, g, name, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, kmsg.StringPtr(value)
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp := atSeed(ctx, t, cl, req).(*kmsg.IncrementalAlterConfigsResponse)
	if code := resp.Resources[0].ErrorCode; code != 0 {
		t.Fatalf("set %s %s=%s: error %d %v", g, name, value, code, resp.Resources[0].ErrorMessage)
	}
}

// joinInterval joins g with a new consumer-protocol member (subscribed to
// topic), leaves again (so that the next join finds the group empty, not
// rebalancing, which shortens the interval) and returns the heartbeat
// interval the coordinator gave it.
func joinInterval(ctx context.Context, t *testing.T, cl *kgo.Client, g, member, topic string) int32 {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, g, member, 0
	req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 60000, []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, err := req.RequestWith(ctx, cl) // kgo finds the coordinator
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("join %s: error %d", g, resp.ErrorCode)
	}
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Version, leave.Group, leave.MemberID, leave.MemberEpoch = 1, g, member, -1
	leave.RebalanceTimeoutMillis = -1
	if lr, err := leave.RequestWith(ctx, cl); err != nil || lr.ErrorCode != 0 {
		t.Fatalf("leave %s: %v %+v", g, err, lr)
	}
	return resp.HeartbeatIntervalMillis
}

// describedSource is the value and source DescribeConfigs gives for g's name.
func describedSource(ctx context.Context, t *testing.T, cl *kgo.Client, g, name string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, g, []string{name}
	req.Resources = append(req.Resources, rr)
	resp := atSeed(ctx, t, cl, req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("describe %s: %+v", g, resp.Resources)
	}
	c := resp.Resources[0].Configs[0]
	return fmt.Sprintf("%s/%s", *c.Value, c.Source)
}

// TestGroupConfigReachesMembers: a consumer group's heartbeat interval set
// with IncrementalAlterConfigs is the one its members are given (another
// group keeps the node's), and it survives a restart of the node on its
// data directory.
func TestGroupConfigReachesMembers(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := filepath.Join(t.TempDir(), "data")
	gcfg := group.Defaults()
	gcfg.ConsumerHeartbeatInterval = 2 * time.Second
	n := startLoaded(t, Config{Listen: "127.0.0.1:0", DataDir: dir, Partitions: 5, Logger: quiet, Group: gcfg})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := client(t, n.Addr())
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "t", 2, 1
	create.Topics = append(create.Topics, ct)
	if r, err := create.RequestWith(ctx, cl); err != nil || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, r)
	}
	setGroupConfig(ctx, t, cl, "tuned", group.ConfigHeartbeatInterval, "1500")
	if got := joinInterval(ctx, t, cl, "tuned", "m1", "t"); got != 1500 {
		t.Fatalf("tuned group's interval %d, want its own 1500", got)
	}
	if got := joinInterval(ctx, t, cl, "plain", "m1", "t"); got != 2000 {
		t.Fatalf("another group's interval %d, want the node's 2000", got)
	}
	n.Close()

	r := startLoaded(t, Config{Listen: "127.0.0.1:0", DataDir: dir, Partitions: 5, Logger: quiet, Group: gcfg})
	defer r.Close()
	cl = client(t, r.Addr())
	if got := describedSource(ctx, t, cl, "tuned", group.ConfigHeartbeatInterval); got != "1500/GROUP_CONFIG" {
		t.Fatalf("after a restart: %s", got)
	}
	if got := joinInterval(ctx, t, cl, "tuned", "m2", "t"); got != 1500 {
		t.Fatalf("after a restart the interval is %d, want 1500", got)
	}
}

// TestClusterGroupConfig: in cluster mode a group config set through any
// node reaches the node that coordinates the group (through the catalog in
// etcd).
func TestClusterGroupConfig(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ns := startCluster848(t, ec, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seeds := kgo.SeedBrokers(ns[0].Addr(), ns[1].Addr())
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "t", 2, 1
	create.Topics = append(create.Topics, ct)
	if r, err := create.RequestWith(ctx, client(t, ns[0].Addr(), seeds)); err != nil || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, r)
	}
	// The node that does not coordinate the group takes the first
	// change, the coordinator the second.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "tuned", []string{"tuned"} // v0–3, v4+
	fr, err := fc.RequestWith(ctx, client(t, ns[0].Addr(), seeds))
	if err != nil || fr.ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %v %+v", err, fr)
	}
	coord := fr.NodeID
	if len(fr.Coordinators) > 0 {
		coord = fr.Coordinators[0].NodeID
	}
	if coord != 1 && coord != 2 {
		t.Fatalf("coordinator %d", coord)
	}
	order := []*Node{ns[0], ns[1]}
	if coord == 1 {
		order = []*Node{ns[1], ns[0]}
	}
	// A member first, so that the coordinator has read the (absent)
	// configs before the change comes from the other node.
	if got := joinInterval(ctx, t, client(t, ns[0].Addr(), seeds), "tuned", "m-first", "t"); got != 250 {
		t.Fatalf("before any change: interval %d, want the node's 250", got)
	}
	for i, nd := range order {
		at := client(t, nd.Addr())
		want := int32(1000 + 111*(i+1))
		setGroupConfig(ctx, t, at, "tuned", group.ConfigHeartbeatInterval, strconv.Itoa(int(want)))
		cl := client(t, nd.Addr(), seeds)
		k := 0
		testwait.For(t, 20*time.Second, fmt.Sprintf("interval %d set through node %d", want, i+1), func() bool {
			k++
			return joinInterval(ctx, t, cl, "tuned", fmt.Sprintf("m%d-%d", i, k), "t") == want
		})
	}
}

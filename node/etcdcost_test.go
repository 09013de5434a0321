package node

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"google.golang.org/grpc"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// etcdCalls counts a node's etcd requests by gRPC method: "unary <method>"
// per unary call (each retry too), "open <method>" per stream opened and
// "send <method>" per message sent on a stream (a lease keepalive, a watch
// set up).
type etcdCalls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *etcdCalls) add(k string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
	c.mu.Unlock()
}

func (c *etcdCalls) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// take returns the counts so far and starts again from zero.
func (c *etcdCalls) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.n
	c.n = map[string]int{}
	return m
}

type countedStream struct {
	grpc.ClientStream
	c      *etcdCalls
	method string
}

func (s countedStream) SendMsg(m any) error {
	s.c.add("send " + s.method)
	return s.ClientStream.SendMsg(m)
}

func (c *etcdCalls) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.add("unary " + method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			c.add("open " + method)
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return s, err
			}
			return countedStream{s, c, method}, nil
		}),
	}
}

func callList(m map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, " %s=%d", k, m[k])
	}
	return b.String()
}

const (
	keepAliveMethod = "/etcdserverpb.Lease/LeaseKeepAlive"
	watchMethod     = "/etcdserverpb.Watch/Watch"
)

// TestClusterEtcdCostAtRest: what a cluster's nodes ask of etcd while
// nothing changes, and what a commit costs. Three nodes on one etcd (lease
// TTL 6 s), node 1 coordinating (among others) 20 classic groups and 20
// consumer-protocol members, each heartbeating without pause; every etcd
// request of each node is counted by a gRPC interceptor on its etcd client.
// While at least three keepalives of each node go by, a node sends etcd
// nothing but its lease keepalives, one each TTL/3, on the one stream it
// already had open: heartbeats of stable groups reach etcd not at all, and
// no periodic read or write happens (before c0f27ce every keepalive opened
// a stream of its own, and logged in to an etcd with authentication). Then
// 20 OffsetCommits of 4 partitions, one after the other, cost one etcd
// transaction and one revision each, and no read.
func TestClusterEtcdCostAtRest(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ecli := ec.Client(t)
	const ttl = 6 * time.Second // a keepalive times out after TTL/3: margin for a loaded CI machine
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	calls := []*etcdCalls{{}, {}, {}}
	var ns []*Node
	for i, c := range calls {
		nd, err := Start(Config{Listen: "127.0.0.1:0", NodeID: int32(i + 1), ClusterID: "test", Partitions: 8, Group: gcfg,
			Logger: slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
			Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/cost/", LeaseTTL: ttl, CompactionInterval: -1,
				dialOptions: c.dialOptions()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		ns = append(ns, nd)
	}
	waitClusterSettled(t, 20*time.Second, ns...)
	testwait.For(t, 20*time.Second, "every node ready, its watches set up and its lease renewed once", func() bool {
		for i, n := range ns {
			// The registry and ownership (one stream), the topic
			// catalog, the group configs, credentials and ACLs.
			if ok, _ := n.Ready(); !ok || calls[i].get("open "+watchMethod) < 4 || calls[i].get("send "+keepAliveMethod) < 1 {
				return false
			}
		}
		return true
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kcl := client(t, ns[0].Addr())
	// Groups whose coordinator is node 1.
	var classic, consumer []string
	for i := 0; len(classic) < 20 || len(consumer) < 20; i++ {
		g := fmt.Sprintf("g%d", i)
		if b, _ := ns[0].Cluster().Coordinator(g); b.NodeID != 1 {
			continue
		}
		if len(classic) < 20 {
			classic = append(classic, g)
		} else {
			consumer = append(consumer, g)
		}
	}
	type member struct {
		g, id string
		gen   int32
	}
	var cms, kms []member
	for _, g := range classic {
		j := kmsg.NewPtrJoinGroupRequest()
		j.Version, j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = 9, g, 45000, 60000, "consumer"
		j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
		r, err := j.RequestWith(ctx, kcl)
		if err == nil && r.ErrorCode == 79 { // MEMBER_ID_REQUIRED: join again with it
			j.MemberID = r.MemberID
			r, err = j.RequestWith(ctx, kcl)
		}
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("join %s: %v %+v", g, err, r)
		}
		s := kmsg.NewPtrSyncGroupRequest()
		s.Version, s.Group, s.Generation, s.MemberID = 5, g, r.Generation, r.MemberID
		pt, pn := "consumer", "range"
		s.ProtocolType, s.Protocol = &pt, &pn
		s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: r.MemberID, MemberAssignment: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
		if sr, err := s.RequestWith(ctx, kcl); err != nil || sr.ErrorCode != 0 {
			t.Fatalf("sync %s: %v %+v", g, err, sr)
		}
		cms = append(cms, member{g, r.MemberID, r.Generation})
	}
	for i, g := range consumer {
		h := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		h.Version, h.Group, h.MemberID, h.MemberEpoch = 1, g, fmt.Sprintf("member-%02d-0123456789abcdef", i), 0
		h.RebalanceTimeoutMillis, h.SubscribedTopicNames = 60000, []string{"events"}
		h.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r, err := h.RequestWith(ctx, kcl)
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("consumer join %s: %v %+v", g, err, r)
		}
		kms = append(kms, member{g, h.MemberID, r.MemberEpoch})
	}
	heartbeats := func() {
		for _, m := range cms {
			h := kmsg.NewPtrHeartbeatRequest()
			h.Version, h.Group, h.Generation, h.MemberID = 4, m.g, m.gen, m.id
			if r, err := h.RequestWith(ctx, kcl); err != nil || r.ErrorCode != 0 {
				t.Fatalf("heartbeat %s: %v %+v", m.g, err, r)
			}
		}
		for _, m := range kms {
			h := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			h.Version, h.Group, h.MemberID, h.MemberEpoch = 1, m.g, m.id, m.gen
			h.RebalanceTimeoutMillis = -1
			if r, err := h.RequestWith(ctx, kcl); err != nil || r.ErrorCode != 0 || r.MemberEpoch != m.gen {
				t.Fatalf("consumer heartbeat %s: %v %+v", m.g, err, r)
			}
		}
	}
	heartbeats() // every group stable, its writes durable

	for _, c := range calls {
		c.take()
	}
	start := time.Now()
	rounds := 0
	// A round of heartbeats after each keepalive of any node, until every
	// node has renewed its lease three times more.
	renewals := func() (sum, least int) {
		least = 1 << 30
		for _, c := range calls {
			n := c.get("send " + keepAliveMethod)
			sum, least = sum+n, min(least, n)
		}
		return sum, least
	}
	for sum, least := renewals(); least < 3; rounds++ {
		heartbeats()
		testwait.For(t, 10*time.Second, "a keepalive", func() bool {
			s, _ := renewals()
			return s > sum
		})
		sum, least = renewals()
	}
	elapsed := time.Since(start)
	for i, c := range calls {
		got := c.take()
		t.Logf("node %d, %v at rest (%d rounds of %d heartbeats on node 1):%s", i+1, elapsed.Round(time.Millisecond), rounds, len(cms)+len(kms), callList(got))
		ka := got["send "+keepAliveMethod]
		delete(got, "send "+keepAliveMethod)
		if len(got) > 0 {
			t.Errorf("node %d at rest asked etcd for more than lease keepalives:%s", i+1, callList(got))
		}
		if most := int(elapsed/(ttl/3)) + 2; ka > most {
			t.Errorf("node %d sent %d keepalives in %v, want at most %d (one each TTL/3 = %v)", i+1, ka, elapsed, most, ttl/3)
		}
	}

	// Commits: OffsetCommit v8 (by topic name, no topic id needed).
	ccl := client(t, ns[0].Addr(), kgo.MaxVersions(kversion.V3_0_0()))
	rev := func() int64 {
		r, err := ecli.Get(ctx, "/cost/none")
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	r0 := rev()
	const commits = 20
	for i := 0; i < commits; i++ {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = classic[0]+"-offsets", -1
		tp := kmsg.OffsetCommitRequestTopic{Topic: "events"}
		for p := int32(0); p < 4; p++ {
			tp.Partitions = append(tp.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: int64(i), LeaderEpoch: -1})
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{tp}
		r, err := req.RequestWith(ctx, ccl)
		if err != nil || r.Version != 8 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %d: %v %+v", i, err, r)
		}
	}
	revs := rev() - r0
	total := map[string]int{}
	for _, c := range calls {
		for k, v := range c.take() {
			if k != "send "+keepAliveMethod {
				total[k] += v
			}
		}
	}
	t.Logf("%d commits of 4 partitions: %d etcd revisions;%s", commits, revs, callList(total))
	if want := map[string]int{"unary /etcdserverpb.KV/Txn": commits}; !maps.Equal(total, want) || revs != commits {
		t.Errorf("%d commits cost%s and %d revisions, want one transaction and one revision each", commits, callList(total), revs)
	}
}

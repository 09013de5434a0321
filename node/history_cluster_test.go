package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/cutproxy"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// Issue 16: the rebalance history survives a failover in cluster mode. A
// classic group rebalances twice on node 1, its coordinator; node 1 goes
// (it stops and hands over, or it loses etcd and its lease expires while
// its process runs on); node 2 loads the group's partition from etcd and
// answers DescribeGroups tag 10001 with the same two events, byte for byte.
// The member's rejoin on node 2 is event 3, cause loaded: the numbering
// continues and the failover is named. The history records (kind 0x09)
// reach node 2 only through the etcd store, so this also shows the etcd
// store keeps them.

func TestHistorySurvivesFailoverStop(t *testing.T) {
	historyFailoverCase(t, etcdtest.Start(t, 1), nil, nil, func(ns []*Node) {
		if err := ns[0].Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHistorySurvivesFailoverLeaseExpires: node 1's lease ends when the
// test says (expireLease), not after a wall-clock TTL.
func TestHistorySurvivesFailoverLeaseExpires(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	px := cutproxy.Start(t, strings.TrimPrefix(ec.Endpoints()[0], "http://"))
	clk := &leaseClock{}
	historyFailoverCase(t, ec, []string{"http://" + px.Addr()}, clk, func(ns []*Node) {
		px.Cut()
		expireLease(t, ec, k848Prefix, 1, clk, testLeaseTTL, ns[0])
	})
}

func historyFailoverCase(t *testing.T, ec *etcdtest.Cluster, node1Etcd []string, node1Clock *leaseClock, takeDown func(ns []*Node)) {
	ns := startCluster848Clock(t, ec, 2, node1Etcd, node1Clock)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gid := groupOwnedBy(t, ns[1], 1, "hist-failover")
	p := coordinator.PartitionFor(gid, k848Parts)

	hc := newClusterHistoryClient(t, ctx, gid, 45000, ns[0].Addr(), ns[1].Addr()) // sessions far above a failover
	rebalance, history := hc.rebalance, hc.history

	m := rebalance("")
	rebalance(m) // the leader's rejoin: a second event
	before := history(1, 2)
	if h := before.History; len(h) != 2 || h[0].Cause.Kind != group.CauseMemberJoined || h[0].Cause.MemberID != m ||
		h[1].Cause.Kind != group.CauseMetadataChanged || h[1].Seq != 2 {
		t.Fatalf("on node 1: %s", jsonOf(before.History))
	}

	takeDown(ns)
	if !testwait.Until(30*time.Second, func() bool { return ns[1].Cluster().Owner(p) == 2 }) {
		t.Fatalf("partition %d of group %s not with node 2 after 30 s", p, gid)
	}
	waitClusterSettled(t, 30*time.Second, ns[1])

	after := history(2, 2)
	if a, b := jsonOf(before.History), jsonOf(after.History); a != b {
		t.Fatalf("history differs after the failover:\nnode 1 %s\nnode 2 %s", a, b)
	}
	rebalance(m)
	h := history(2, 3).History
	if len(h) != 3 || h[2].Seq != 3 || h[2].Cause.Kind != group.CauseLoaded || h[2].FromGeneration != h[1].Generation {
		t.Fatalf("on node 2 after the member's rejoin: %s", jsonOf(h))
	}
	if a, b := jsonOf(before.History), jsonOf(h[:2]); a != b {
		t.Fatalf("the first events changed:\nbefore %s\nnow    %s", a, b)
	}
}

// clusterHistoryClient joins one-member classic groups to a group of a
// cluster (its JoinGroup and SyncGroup follow the coordinator: kgo's
// FindCoordinator and NOT_COORDINATOR retries; the client knows every
// node) and reads the group's history from a node it names.
type clusterHistoryClient struct {
	t         *testing.T
	ctx       context.Context
	cl        *kgo.Client
	group     string
	sessionMs int32 // the members' session and rebalance timeouts
}

func newClusterHistoryClient(t *testing.T, ctx context.Context, gid string, sessionMs int32, addrs ...string) *clusterHistoryClient {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DialTimeout(time.Second), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &clusterHistoryClient{t: t, ctx: ctx, cl: cl, group: gid, sessionMs: sessionMs}
}

// rebalance joins member ("": a new one) and syncs it alone; it returns
// its member id.
func (hc *clusterHistoryClient) rebalance(member string) string {
	t, ctx, cl, gid := hc.t, hc.ctx, hc.cl, hc.group
	t.Helper()
	j := kmsg.NewPtrJoinGroupRequest()
	j.Group, j.MemberID, j.ProtocolType = gid, member, "consumer"
	j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = hc.sessionMs, hc.sessionMs
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
	jr, err := j.RequestWith(ctx, cl)
	if err == nil && jr.ErrorCode == kerr.MemberIDRequired.Code { // KIP-394
		j.MemberID = jr.MemberID
		jr, err = j.RequestWith(ctx, cl)
	}
	if err != nil || jr.ErrorCode != 0 {
		t.Fatalf("join: %v %+v", err, jr)
	}
	if jr.Protocol == nil || *jr.Protocol != "range" {
		t.Fatalf("join: protocol %v", jr.Protocol)
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = gid, jr.MemberID, jr.Generation
	s.ProtocolType, s.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("a")}}
	if sr, err := s.RequestWith(ctx, cl); err != nil || sr.ErrorCode != 0 {
		t.Fatalf("sync: %v %+v", err, sr)
	}
	return jr.MemberID
}

// history asks node id directly (DescribeGroups v5 with tag 10001; kgo's
// own sharding would drop the tag) until the group's history holds want
// events.
func (hc *clusterHistoryClient) history(id int32, want int) *group.HistoryDoc {
	t := hc.t
	t.Helper()
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{hc.group}
	group.RequestHistory(d, -1)
	var last string
	var doc *group.HistoryDoc
	if testwait.Until(30*time.Second, func() bool { // the event is written after the sync answer
		resp, err := hc.cl.Broker(int(id)).Request(hc.ctx, d)
		if err != nil {
			last = err.Error()
			return false
		}
		r := resp.(*kmsg.DescribeGroupsResponse)
		// A consumer-protocol group is answered as not found, with its
		// history (as the CLI reads it).
		if len(r.Groups) == 1 {
			if got, ok := group.HistoryTagOf(&r.Groups[0]); ok {
				if len(got.History) >= want {
					doc = got
					return true
				}
				last = "history " + jsonOf(got.History)
				return false
			}
		}
		last = "groups " + strings.TrimSpace(jsonOf(r.Groups))
		return false
	}) {
		return doc
	}
	t.Fatalf("node %d: no history of %d events of group %s; last answer: %s", id, want, hc.group, last)
	return nil
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// The rejoin links (cause.rejoin, docs/history.md) across a move of the
// group's coordinator partition to another node, for a classic and a
// consumer-protocol group. On node 1, member A's session runs out and the
// same client (client id and host) joins again as B, which is linked to A's
// eviction; then B's session runs out. The partition moves to node 2 (node
// 1 stops and hands it over, or node 1 is cut off from etcd and its lease
// ends), which loads the group from etcd: its history reads the same there,
// B's link to A included, and when the client joins a third time, as C, C
// is linked to B's eviction (rebuilt from the stored history by node 2).
// After C leaves, a fourth join D links nothing: A's eviction was consumed
// by B's join before the move. The groups' timeouts run on a fake clock
// both nodes share; node 1's lease ends by expireLease, not by waiting its
// TTL.

func TestRejoinLinkSurvivesFailoverStop(t *testing.T) {
	rejoinFailoverCases(t, "/rejoin-stop/", func(n1 *Node, _ *cutproxy.Proxy, _ func()) {
		if err := n1.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRejoinLinkSurvivesFailoverLeaseExpires(t *testing.T) {
	rejoinFailoverCases(t, "/rejoin-expire/", func(_ *Node, px *cutproxy.Proxy, expire1 func()) {
		px.Cut()
		expire1()
	})
}

// rejoiner is how a rejoin test's client uses its group: join adds a new
// member (through the rebalance it starts: the event is complete), leave
// makes one leave, and a member's session lasts session.
type rejoiner struct {
	join    func() string
	leave   func(id string)
	session time.Duration
}

func rejoinFailoverCases(t *testing.T, prefix string, takeDown func(n1 *Node, px *cutproxy.Proxy, expire1 func())) {
	t.Run("classic", func(t *testing.T) {
		rejoinFailoverCase(t, prefix+"classic/", takeDown, func(hc *clusterHistoryClient, _ *Node, _ func() int32) rejoiner {
			return rejoiner{
				join: func() string { return hc.rebalance("") },
				leave: func(id string) {
					t.Helper()
					l := kmsg.NewPtrLeaveGroupRequest()
					l.Group = hc.group
					l.Members = []kmsg.LeaveGroupRequestMember{{MemberID: id}}
					if r, err := l.RequestWith(hc.ctx, hc.cl); err != nil || r.ErrorCode != 0 || len(r.Members) != 1 || r.Members[0].ErrorCode != 0 {
						t.Fatalf("leave of %s: %v %s", id, err, jsonOf(r))
					}
				},
				session: time.Duration(hc.sessionMs) * time.Millisecond,
			}
		})
	})
	t.Run("consumer", func(t *testing.T) {
		rejoinFailoverCase(t, prefix+"consumer/", takeDown, func(hc *clusterHistoryClient, n1 *Node, owner func() int32) rejoiner {
			if _, err := n1.Catalog().Create("rejoin-topic", 1, nil); err != nil {
				t.Fatal(err)
			}
			beat := func(id string, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kmsg.ConsumerGroupHeartbeatResponse {
				t.Helper()
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Group, req.MemberID, req.MemberEpoch = hc.group, id, epoch
				req.RebalanceTimeoutMillis = -1
				if epoch == 0 {
					req.RebalanceTimeoutMillis = 60000
					req.SubscribedTopicNames = []string{"rejoin-topic"}
				}
				req.Topics = owned
				// Sent to the coordinator in node 2's view (kgo does
				// not find a moved coordinator again for this request),
				// and again while it moves: a closed connection, or an
				// answer that the node does not coordinate the group
				// (now), means it was not taken.
				var resp *kmsg.ConsumerGroupHeartbeatResponse
				err := testwait.Err(30*time.Second, func() (err error) {
					r, err := hc.cl.Broker(int(owner())).Request(hc.ctx, req)
					if err != nil {
						return err
					}
					resp = r.(*kmsg.ConsumerGroupHeartbeatResponse)
					switch e := kerr.ErrorForCode(resp.ErrorCode); e {
					case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress:
						return e
					}
					return nil
				})
				if err != nil || resp.ErrorCode != 0 {
					t.Fatalf("heartbeat of %s at epoch %d: %v %s", id, epoch, err, jsonOf(resp))
				}
				return resp
			}
			members := 0
			return rejoiner{
				join: func() string {
					members++
					id := fmt.Sprintf("rejoin-member-%d", members)
					r := beat(id, 0, []kmsg.ConsumerGroupHeartbeatRequestTopic{})
					owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
					if r.Assignment != nil {
						for _, tp := range r.Assignment.Topics {
							owned = append(owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
						}
					}
					beat(id, r.MemberEpoch, owned) // reconciled: the join's rebalance is complete
					return id
				},
				leave:   func(id string) { beat(id, -1, nil) },
				session: group.Defaults().ConsumerSessionTimeout,
			}
		})
	})
}

func rejoinFailoverCase(t *testing.T, prefix string, takeDown func(n1 *Node, px *cutproxy.Proxy, expire1 func()),
	use func(hc *clusterHistoryClient, n1 *Node, owner func() int32) rejoiner) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	px, n1, n2, expire1 := startCutClusterClock(t, prefix, clk)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gid := groupOwnedBy(t, n2, 1, "rejoin-move")
	p := coordinator.PartitionFor(gid, k848Parts)
	hc := newClusterHistoryClient(t, ctx, gid, 10000, n1.Addr(), n2.Addr())
	rj := use(hc, n1, func() int32 { return n2.Cluster().Owner(p) })
	expire := func() { clk.Advance(rj.session + time.Second) }

	a := rj.join()
	expire() // A's session runs out: the group is Empty
	evA := hc.history(1, 2).History[1]
	if evA.Cause.Kind != group.CauseSessionTimeout || evA.Cause.MemberID != a {
		t.Fatalf("A's eviction: %s", jsonOf(evA))
	}
	clk.Advance(2 * time.Second)
	b := rj.join()
	joinB := hc.history(1, 3).History[2].Cause
	wantB := group.Rejoin{MemberID: a, Kind: group.CauseSessionTimeout, At: evA.Cause.At, AfterMs: 2000, By: "client"}
	if joinB.Kind != group.CauseMemberJoined || joinB.MemberID != b || jsonOf(joinB.Rejoin) != jsonOf(wantB) {
		t.Fatalf("B's join on node 1: %s, want rejoin %s", jsonOf(joinB), jsonOf(wantB))
	}
	expire() // B's session runs out
	before := hc.history(1, 4)
	evB := before.History[3]
	if evB.Cause.Kind != group.CauseSessionTimeout || evB.Cause.MemberID != b {
		t.Fatalf("B's eviction: %s", jsonOf(evB))
	}

	// A consumer group's event is in its history from the moment the
	// write holding it is applied, before etcd has it (docs/history.md):
	// node 1 is taken down once etcd holds the four events, which node 2
	// must then have.
	waitStoredHistory(t, n2, p, gid, 4)
	takeDown(n1, px, expire1)
	if !testwait.Until(30*time.Second, func() bool { return n2.Cluster().Owner(p) == 2 }) {
		t.Fatalf("partition %d of group %s not with node 2 after 30 s", p, gid)
	}
	waitClusterSettled(t, 30*time.Second, n2)

	after := hc.history(2, 4)
	if x, y := jsonOf(before.History), jsonOf(after.History); x != y {
		t.Fatalf("history differs after the move:\nnode 1 %s\nnode 2 %s", x, y)
	}
	clk.Advance(3 * time.Second)
	c := rj.join()
	h := hc.history(2, 5).History
	joinC := h[len(h)-1].Cause
	wantC := group.Rejoin{MemberID: b, Kind: group.CauseSessionTimeout, At: evB.Cause.At, AfterMs: 3000, By: "client"}
	if len(h) != 5 || joinC.Kind != group.CauseMemberJoined || joinC.MemberID != c || jsonOf(joinC.Rejoin) != jsonOf(wantC) {
		t.Fatalf("C's join on node 2: %s, want rejoin %s", jsonOf(h[len(h)-1]), jsonOf(wantC))
	}
	if x, y := jsonOf(before.History), jsonOf(h[:4]); x != y {
		t.Fatalf("the first events changed:\nbefore %s\nnow    %s", x, y)
	}

	rj.leave(c) // not an eviction
	clk.Advance(time.Second)
	d := rj.join()
	h = hc.history(2, 7).History
	if joinD := h[len(h)-1].Cause; len(h) != 7 || joinD.Kind != group.CauseMemberJoined || joinD.MemberID != d || joinD.Rejoin != nil {
		t.Fatalf("D's join on node 2, after C left: %s, want no rejoin", jsonOf(h[len(h)-1]))
	}
}

// waitStoredHistory waits (bounded) until etcd, read through n's client,
// holds want history records (kind 0x09, group/historyrec.go) of group gid
// in coordinator partition p.
func waitStoredHistory(t *testing.T, n *Node, p int32, gid string, want int) {
	t.Helper()
	prefix := n.cl.st.RecordKey(p, []byte{0x09})
	got := 0
	if !testwait.Until(10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := n.cl.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return false
		}
		got = 0
		for _, kv := range r.Kvs {
			if strings.Contains(string(kv.Key), gid) {
				got++
			}
		}
		return got >= want
	}) {
		t.Fatalf("etcd holds %d history records of group %s, want %d", got, gid, want)
	}
}

package node

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
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
	historyFailoverCase(t, etcdtest.Start(t, 1), nil, func(ns []*Node) {
		if err := ns[0].Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestHistorySurvivesFailoverLeaseExpires(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	px := cutproxy.Start(t, strings.TrimPrefix(ec.Endpoints()[0], "http://"))
	historyFailoverCase(t, ec, []string{"http://" + px.Addr()}, func([]*Node) { px.Cut() })
}

func historyFailoverCase(t *testing.T, ec *etcdtest.Cluster, node1Etcd []string, takeDown func(ns []*Node)) {
	ns := startCluster848(t, ec, 2, node1Etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gid := groupOwnedBy(t, ns[1], 1, "hist-failover")
	p := coordinator.PartitionFor(gid, k848Parts)

	// The joins and syncs follow the coordinator (kgo's FindCoordinator and
	// NOT_COORDINATOR retries); the client knows both nodes.
	cl, err := kgo.NewClient(kgo.SeedBrokers(ns[0].Addr(), ns[1].Addr()),
		kgo.DialTimeout(time.Second), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rebalance := func(member string) string {
		t.Helper()
		j := kmsg.NewPtrJoinGroupRequest()
		j.Group, j.MemberID, j.ProtocolType = gid, member, "consumer"
		j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 45000, 45000 // far above a failover
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
	// own sharding would drop the tag) until it holds want events.
	history := func(id int32, want int) *group.HistoryDoc {
		t.Helper()
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Groups = []string{gid}
		group.RequestHistory(d, -1)
		var last string
		var doc *group.HistoryDoc
		if testwait.Until(30*time.Second, func() bool { // the event is written after the sync answer
			resp, err := cl.Broker(int(id)).Request(ctx, d)
			if err != nil {
				last = err.Error()
				return false
			}
			r := resp.(*kmsg.DescribeGroupsResponse)
			if len(r.Groups) == 1 && r.Groups[0].ErrorCode == 0 {
				if got, ok := group.HistoryTagOf(&r.Groups[0]); ok && len(got.History) >= want {
					doc = got
					return true
				}
			}
			last = "groups " + strings.TrimSpace(jsonOf(r.Groups))
			return false
		}) {
			return doc
		}
		t.Fatalf("node %d: no history of %d events of group %s; last answer: %s", id, want, gid, last)
		return nil
	}

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

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

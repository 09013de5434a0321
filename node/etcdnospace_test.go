package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterEtcdOutOfSpace fills etcd's backend quota: etcd raises its
// NOSPACE alarm and refuses every write but deletes. The node keeps serving
// what needs no write (offset fetches, classic heartbeats), answers commits
// with the retriable COORDINATOR_NOT_AVAILABLE and counts them, and once the
// operator has freed space, compacted, defragmented and disarmed the alarm
// (operations.md) it commits again without a restart.
func TestClusterEtcdOutOfSpace(t *testing.T) {
	ec := etcdtest.StartWith(t, 1, func(c *embed.Config) { c.QuotaBackendBytes = 4 << 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	logs := logTail{silent: true}
	n, err := Start(Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 4, HTTPListen: "127.0.0.1:0",
		Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/full/", LeaseTTL: testLeaseTTL, CompactionInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node logs:\n%s", logs.String())
		}
	})
	waitClusterSettled(t, 30*time.Second, n)
	adm := kadm.NewClient(client(t, n.Addr()))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	commitUntilOwned(ctx, t, adm, "g", "events", 1)

	// A classic group with one member, stable.
	rc := dialRaw(t, n.Addr())
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "classic", 30000, 30000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	jr, err := rc.roundTrip(join)
	if err != nil || jr.(*kmsg.JoinGroupResponse).ErrorCode != 0 {
		t.Fatalf("join: %v %+v", err, jr)
	}
	member, gen := jr.(*kmsg.JoinGroupResponse).MemberID, jr.(*kmsg.JoinGroupResponse).Generation
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 3
	sync.Group, sync.MemberID, sync.Generation = "classic", member, gen
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	if sr, err := rc.roundTrip(sync); err != nil || sr.(*kmsg.SyncGroupResponse).ErrorCode != 0 {
		t.Fatalf("sync: %v %+v", err, sr)
	}

	// Fill etcd until it refuses writes.
	root := ec.Client(t)
	for i := 0; ; i++ {
		_, err := root.Put(ctx, fmt.Sprintf("/junk/%d", i), strings.Repeat("j", 100<<10))
		if errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	commit := func(at int64) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 2
		req.Group, req.Generation = "g", -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "events",
			Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: at}}}}
		resp, err := dialRaw(t, n.Addr()).roundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	fetched := func() int64 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 1
		req.Group = "g"
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "events", Partitions: []int32{0}}}
		resp, err := dialRaw(t, n.Addr()).roundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("offset fetch: error %d", p.ErrorCode)
		}
		return p.Offset
	}
	heartbeat := func() int16 {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version = 1
		hb.Group, hb.MemberID, hb.Generation = "classic", member, gen
		resp, err := rc.roundTrip(hb)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.HeartbeatResponse).ErrorCode
	}

	for i := 0; i < 3; i++ {
		if code := commit(2); code != 15 {
			t.Fatalf("commit on a full etcd: error %d, want 15 (COORDINATOR_NOT_AVAILABLE, retriable)", code)
		}
		if code := heartbeat(); code != 0 {
			t.Fatalf("classic heartbeat on a full etcd: error %d", code)
		}
		if at := fetched(); at != 1 {
			t.Fatalf("offset fetched on a full etcd: %d, want 1", at)
		}
	}
	// A new classic group's SyncGroup must store the group: refused.
	join.Group = "classic-new"
	jr, err = rc.roundTrip(join)
	if err != nil || jr.(*kmsg.JoinGroupResponse).ErrorCode != 0 {
		t.Fatalf("join on a full etcd: %v %+v", err, jr)
	}
	sync.Group, sync.MemberID, sync.Generation = "classic-new", jr.(*kmsg.JoinGroupResponse).MemberID, jr.(*kmsg.JoinGroupResponse).Generation
	sync.GroupAssignment[0].MemberID = sync.MemberID
	if sr, err := rc.roundTrip(sync); err != nil || sr.(*kmsg.SyncGroupResponse).ErrorCode != 15 {
		t.Fatalf("sync on a full etcd: %v %+v, want error 15 (COORDINATOR_NOT_AVAILABLE)", err, sr)
	}
	if m := scrapeMetrics(t, n.HTTPAddr()); m.value("cohort_store_append_errors_total") < 3 {
		t.Errorf("cohort_store_append_errors_total %v, want at least 3", m.value("cohort_store_append_errors_total"))
	}
	if !logs.has("database space exceeded") {
		t.Errorf("the node's log does not say etcd is out of space:\n%s", logs.String())
	}

	// The operator's recovery: free space, compact, defragment, disarm.
	if _, err := root.Delete(ctx, "/junk/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	g, err := root.Get(ctx, "/junk/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Compact(ctx, g.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Defragment(ctx, ec.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	alarms, err := root.AlarmList(ctx)
	if err != nil || len(alarms.Alarms) == 0 {
		t.Fatalf("etcd's alarms: %v %v, want NOSPACE", alarms, err)
	}
	if _, err := root.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "a commit succeeding after the alarm is disarmed", func() bool { return commit(2) == 0 })
	if at := fetched(); at != 2 {
		t.Fatalf("offset fetched after recovery: %d, want 2", at)
	}
	if code := heartbeat(); code != 0 {
		t.Fatalf("classic heartbeat after recovery: error %d", code)
	}
}

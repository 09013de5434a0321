package node

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/store/disk"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestDiskStoreBoundsGroupMetadata: on the embedded store a classic group's
// metadata record over the store's bound (disk.Options.MaxRecordBytes,
// DefaultMaxRecordBytes unless set) is not written: its SyncGroup is answered
// UNKNOWN_SERVER_ERROR, as Kafka answers a group too large for its log, and
// nothing is stored for it. Without the bound, members joining with tens of
// megabytes of metadata each wrote a record of hundreds.
func TestDiskStoreBoundsGroupMetadata(t *testing.T) {
	if disk.DefaultMaxRecordBytes <= 0 || disk.DefaultMaxRecordBytes > 64<<20 {
		t.Fatalf("DefaultMaxRecordBytes %d", disk.DefaultMaxRecordBytes)
	}
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelError}))
	st, err := disk.Open(disk.Options{Dir: dir, Logger: quiet, MaxRecordBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := startNode(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rebalance := func(g string, metadata []byte) int16 {
		j := kmsg.NewPtrJoinGroupRequest()
		j.Group, j.ProtocolType = g, "consumer"
		j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 10000, 10000
		j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: metadata}}
		jr := answered(t, ctx, cl, &pinned{j, 3}).(*kmsg.JoinGroupResponse)
		if jr.ErrorCode != 0 {
			t.Fatalf("join %s: %d", g, jr.ErrorCode)
		}
		s := kmsg.NewPtrSyncGroupRequest()
		s.Group, s.MemberID, s.Generation = g, jr.MemberID, jr.Generation
		s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("a")}}
		return answered(t, ctx, cl, &pinned{s, 3}).(*kmsg.SyncGroupResponse).ErrorCode
	}
	if code := rebalance("small", bytes.Repeat([]byte("m"), 100)); code != 0 {
		t.Fatalf("a group under the bound: sync %d", code)
	}
	if code := rebalance("big", bytes.Repeat([]byte("m"), 5000)); code != group.ErrUnknownServer {
		t.Fatalf("a group over the bound: sync %d, want UNKNOWN_SERVER_ERROR", code)
	}
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{"small", "big"}
	r := answered(t, ctx, cl, d).(*kmsg.DescribeGroupsResponse)
	for _, g := range r.Groups {
		if g.Group == "small" && g.State != "Stable" {
			t.Fatalf("small: %s", g.State)
		}
		if g.Group == "big" && g.State == "Stable" {
			t.Fatal("big became Stable without its record")
		}
	}
}

// TestClusterConsumerMemberTooLargeForEtcd: in cluster mode a
// consumer-protocol member whose metadata record etcd would refuse (a
// subscription of 1.8 MB of topic names) is answered UNKNOWN_SERVER_ERROR and
// the group's partition goes on serving. The member was applied first and
// written after: etcd refused the write, the client got a retriable error,
// and the partition reloaded, again at each retry.
func TestClusterConsumerMemberTooLargeForEtcd(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ns := startCluster848(t, ec, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ns[0].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	join := func(member string, names []string) int16 {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "big", member, 0, 60000
		r.SubscribedTopicNames, r.Topics = names, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return answered(t, ctx, cl, &pinned{r, 1}).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
	}
	big := make([]string, 60)
	for i := range big {
		big[i] = fmt.Sprintf("%05d", i) + strings.Repeat("t", 30000)
	}
	if code := join("m1", big); code != group.ErrUnknownServer {
		t.Fatalf("a member of 1.8 MB: code %d, want UNKNOWN_SERVER_ERROR", code)
	}
	if code := join("m2", []string{"t"}); code != 0 {
		t.Fatalf("a small member of the same group afterwards: code %d", code)
	}
}

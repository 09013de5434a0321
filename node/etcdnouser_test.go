package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/cluster"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterEtcdNoUserWhileLeaseHolds: etcd's authentication turned on
// under a node without an etcd user, while the node's lease still holds
// (its keepalives fail too, but the lease has not run out yet). Each place
// that meets etcd's "user name is empty" says what to do about it:
//   - an OffsetCommit: the client gets a retriable code
//     (COORDINATOR_NOT_AVAILABLE, no text), the node's "append failed"
//     warning carries the hint;
//   - the debug line of each failed keepalive carries it;
//   - an AlterConfigs of a group's configs answers with it in the
//     resource's ErrorMessage, instead of a generic message.
func TestClusterEtcdNoUserWhileLeaseHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd, wall clock")
	}
	ec := etcdtest.Start(t, 1)
	var logged testlog.Buffer
	const prefix = "/no-user/"
	// The requests below must reach etcd while the node still holds its
	// lease. Once the authentication is on, none of the node's keepalives
	// is answered, so it used to stop serving a TTL after the last one
	// however long the test needed to get there (with a 15 s lease, runs
	// took 6 s of the ~13 s). Instead, its clock stands still from then
	// on (leaseClock.Freeze: the lease holds in its own view) and the
	// test keeps the lease alive in etcd as root (holdLease), so the
	// lease holds for as long as the test runs, on any machine.
	clk := &leaseClock{}
	n, err := Start(Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 2,
		Logger:  slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: authLeaseTTL, clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	topic, err := n.Catalog().Create("events", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := client(t, n.Addr())
	// A first commit, before etcd's authentication: the group's partition
	// has loaded and takes commits (until then: LOAD_IN_PROGRESS).
	commit := func() *kmsg.OffsetCommitResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "g", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = "events", topic.ID // by name or id, whichever version kgo picks
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 7
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		return &resp.Topics[0].Partitions[0]
	}
	testwait.For(t, 20*time.Second, "a commit taken before etcd's authentication", func() bool { return commit().ErrorCode == 0 })

	clk.Freeze()
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": "late-pass"})
	holdLease(t, ec, prefix, 1, "root-pass")

	// (a) OffsetCommit: a retriable code, the hint in the node's warning.
	p := commit()
	if p.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("commit refused by etcd for want of a user: %v, want COORDINATOR_NOT_AVAILABLE (retriable)", kerr.ErrorForCode(p.ErrorCode))
	}
	if l := line(logged.String(), "append failed", "user name is empty"); !strings.Contains(l, cluster.NoUserAdvice) {
		t.Errorf("the node's warning of the refused commit does not say %q:\n%s", cluster.NoUserAdvice, l)
	}

	// (c) AlterConfigs of a group's configs: the hint in the resource's
	// ErrorMessage.
	incr := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ic.Name, ic.Op, ic.Value = group.ConfigSessionTimeout, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("50000")
	ir.Configs = append(ir.Configs, ic)
	incr.Resources = append(incr.Resources, ir)
	legacy := kmsg.NewPtrAlterConfigsRequest()
	lr := kmsg.NewAlterConfigsRequestResource()
	lr.ResourceType, lr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	lc := kmsg.NewAlterConfigsRequestResourceConfig()
	lc.Name, lc.Value = group.ConfigSessionTimeout, kmsg.StringPtr("50000")
	lr.Configs = append(lr.Configs, lc)
	legacy.Resources = append(legacy.Resources, lr)
	for _, req := range []kmsg.Request{incr, legacy} {
		resp, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var code int16
		var msg *string
		switch r := resp.(type) {
		case *kmsg.IncrementalAlterConfigsResponse:
			code, msg = r.Resources[0].ErrorCode, r.Resources[0].ErrorMessage
		case *kmsg.AlterConfigsResponse:
			code, msg = r.Resources[0].ErrorCode, r.Resources[0].ErrorMessage
		}
		if code != kerr.KafkaStorageError.Code || msg == nil || !strings.Contains(*msg, cluster.NoUserAdvice) {
			t.Errorf("%T refused by etcd for want of a user: %v %q; want KAFKA_STORAGE_ERROR, as CreateTopics answers, with a message that says %q",
				req, kerr.ErrorForCode(code), deref(msg), cluster.NoUserAdvice)
		}
	}

	// (d) The other admin writes: the catalog's (topics) answer
	// KAFKA_STORAGE_ERROR as AlterConfigs does; the group coordinator's
	// (DeleteGroups, OffsetDelete) answer COORDINATOR_NOT_AVAILABLE as
	// OffsetCommit does. All retriable.
	storeRefusals(ctx, t, cl.Broker(1), "g", "events")

	// (b) The debug line of a keepalive refused so (every TTL/3).
	testwait.For(t, 15*time.Second, "a keepalive refused for want of an etcd user", func() bool {
		return line(logged.String(), "keepalive failed", "user name is empty") != ""
	})
	if l := line(logged.String(), "keepalive failed", "user name is empty"); !strings.Contains(l, cluster.NoUserAdvice) {
		t.Errorf("the keepalive's debug line does not say %q:\n%s", cluster.NoUserAdvice, l)
	}
}

// storeRefusals checks the answer of each admin request that writes, sent
// through b while the store refuses writes: topics, and the group g's
// deletion and its offsets of topic.
func storeRefusals(ctx context.Context, t *testing.T, b *kgo.Broker, g, topic string) {
	t.Helper()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "refused-new", 1, 1
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 5000
	parts := kmsg.NewPtrCreatePartitionsRequest()
	pt := kmsg.NewCreatePartitionsRequestTopic()
	pt.Topic, pt.Count = topic, 4
	parts.Topics = append(parts.Topics, pt)
	parts.TimeoutMillis = 5000
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{topic}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics = append(del.Topics, dt)
	del.TimeoutMillis = 5000
	delGroups := kmsg.NewPtrDeleteGroupsRequest()
	delGroups.Groups = []string{g}
	offDel := kmsg.NewPtrOffsetDeleteRequest()
	offDel.Group = g
	ot := kmsg.NewOffsetDeleteRequestTopic()
	ot.Topic = topic
	op := kmsg.NewOffsetDeleteRequestTopicPartition()
	op.Partition = 0
	ot.Partitions = append(ot.Partitions, op)
	offDel.Topics = append(offDel.Topics, ot)

	for _, c := range []struct {
		req  kmsg.Request
		want *kerr.Error
	}{
		{create, kerr.KafkaStorageError},
		{parts, kerr.KafkaStorageError},
		{del, kerr.KafkaStorageError},
		{delGroups, kerr.CoordinatorNotAvailable},
		{offDel, kerr.CoordinatorNotAvailable},
	} {
		resp, err := b.Request(ctx, c.req)
		if err != nil {
			t.Fatal(err)
		}
		var code int16
		switch r := resp.(type) {
		case *kmsg.CreateTopicsResponse:
			code = r.Topics[0].ErrorCode
		case *kmsg.CreatePartitionsResponse:
			code = r.Topics[0].ErrorCode
		case *kmsg.DeleteTopicsResponse:
			code = r.Topics[0].ErrorCode
		case *kmsg.DeleteGroupsResponse:
			code = r.Groups[0].ErrorCode
		case *kmsg.OffsetDeleteResponse:
			if code = r.ErrorCode; code == 0 {
				code = r.Topics[0].Partitions[0].ErrorCode
			}
		}
		if code != c.want.Code {
			t.Errorf("%T refused by the store: %v, want %s", c.req, kerr.ErrorForCode(code), c.want.Message)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// line is the first line of log that holds every one of parts ("" if
// none does).
func line(log string, parts ...string) string {
	for l := range strings.Lines(log) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return l
		}
	}
	return ""
}

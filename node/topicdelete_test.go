package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// commitTopics commits offset at on partition 0 of each topic for group g
// (retrying while the group's partition is not served yet).
func commitTopics(ctx context.Context, t *testing.T, adm *kadm.Client, g string, at int64, topics ...string) {
	t.Helper()
	offs := kadm.Offsets{}
	for _, tp := range topics {
		offs.Add(kadm.Offset{Topic: tp, Partition: 0, At: at, LeaderEpoch: -1})
	}
	var r kadm.OffsetResponses
	var err error
	for ctx.Err() == nil {
		if r, err = adm.CommitOffsets(ctx, g, offs); err == nil && r.Error() == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("commit for %s: %v %v", g, err, r.Error())
}

// offsetsGone waits (bounded) until none of groups has an offset of topic
// and each still has its offset of kept; it fails the test otherwise. adm
// must fetch by name (internal/byname): a v10 fetch of all of a group's
// offsets leaves out a topic outside the catalog, so it would not see
// offsets of the deleted topic that survived.
func offsetsGone(ctx context.Context, t *testing.T, adm *kadm.Client, topic, kept string, groups []string) {
	t.Helper()
	var last string
	if !testwait.Until(10*time.Second, func() bool {
		for _, g := range groups {
			r, err := adm.FetchOffsets(ctx, g)
			if err != nil {
				last = fmt.Sprintf("%s: %v", g, err)
				return false
			}
			if o, ok := r.Lookup(topic, 0); ok && o.At >= 0 {
				last = fmt.Sprintf("%s still has offset %d of %s", g, o.At, topic)
				return false
			}
			if o, ok := r.Lookup(kept, 0); !ok || o.At < 0 {
				t.Fatalf("%s lost its offset of %s", g, kept)
			}
		}
		return true
	}) {
		t.Fatalf("after 10s: %s", last)
	}
}

// TestDeleteTopicRemovesItsOffsets: deleting a topic removes its committed
// offsets from every group, as Kafka does, durably (a restarted node does
// not bring them back); the offsets of other topics stay.
func TestDeleteTopicRemovesItsOffsets(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := filepath.Join(t.TempDir(), "data")
	n := startLoaded(t, Config{Listen: "127.0.0.1:0", DataDir: dir, Partitions: 5, Logger: quiet})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, n.Addr(), byname.Opt()))
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "gone", "kept"); err != nil {
		t.Fatal(err)
	}
	groups := []string{"g1", "g2", "g3", "g4", "g5", "g6"}
	for i, g := range groups {
		commitTopics(ctx, t, adm, g, int64(i+1), "gone", "kept")
	}
	if r, err := adm.DeleteTopics(ctx, "gone"); err != nil || r.Error() != nil {
		t.Fatalf("DeleteTopics: %v %v", err, r.Error())
	}
	offsetsGone(ctx, t, adm, "gone", "kept", groups)
	n.Close()

	r := startLoaded(t, Config{Listen: "127.0.0.1:0", DataDir: dir, Partitions: 5, Logger: quiet})
	defer r.Close()
	offsetsGone(ctx, t, kadm.NewClient(client(t, r.Addr(), byname.Opt())), "gone", "kept", groups)
}

// TestClusterDeleteTopicRemovesItsOffsets: in cluster mode a topic deleted
// through one node loses its offsets in the groups every node coordinates
// (the others hear of it through the catalog in etcd).
func TestClusterDeleteTopicRemovesItsOffsets(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nodes := make([]*Node, 2)
	for i := range nodes {
		n, err := Start(Config{Listen: "127.0.0.1:0", NodeID: int32(i + 1), ClusterID: "test", Partitions: 6, Logger: quiet,
			Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/topicdelete/", LeaseTTL: testLeaseTTL}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes[i] = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, nodes[0].Addr(), kgo.SeedBrokers(nodes[0].Addr(), nodes[1].Addr()), byname.Opt()))
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "gone", "kept"); err != nil {
		t.Fatal(err)
	}
	var groups []string
	for i := range 12 {
		groups = append(groups, fmt.Sprintf("group-%d", i))
	}
	// Every node coordinates some of these groups.
	if !testwait.Until(30*time.Second, func() bool {
		coord := map[int32]bool{}
		for _, g := range groups {
			r := adm.FindGroupCoordinators(ctx, g)[g]
			if r.Err != nil {
				return false
			}
			coord[r.NodeID] = true
		}
		return len(coord) == 2
	}) {
		t.Fatal("the groups' coordinators are not spread over both nodes after 30s")
	}
	for i, g := range groups {
		commitTopics(ctx, t, adm, g, int64(i+1), "gone", "kept")
	}
	del := kadm.NewClient(client(t, nodes[0].Addr()))
	if r, err := del.DeleteTopics(ctx, "gone"); err != nil || r.Error() != nil {
		t.Fatalf("DeleteTopics: %v %v", err, r.Error())
	}
	offsetsGone(ctx, t, adm, "gone", "kept", groups)
}

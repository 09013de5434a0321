package node

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// commitUntilOwned commits offset at for partition 0 of topic in group,
// retrying until the node answering owns the group's partition (again).
func commitUntilOwned(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, at int64) {
	t.Helper()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
	var r kadm.OffsetResponses
	var err error
	for ctx.Err() == nil {
		if r, err = adm.CommitOffsets(ctx, group, offs); err == nil && r.Error() == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("commit %d: %v %v", at, err, r.Error())
}

// startCompacting starts two cluster nodes compacting etcd's history every
// 200 ms, as user (none: etcd without authentication), logging warnings to
// logs.
func startCompacting(t *testing.T, ec *etcdtest.Cluster, prefix, user, pass string, logs *logTail) []*Node {
	var ns []*Node
	for id := int32(1); id <= 2; id++ {
		n, err := Start(Config{Listen: "127.0.0.1:0", NodeID: id, ClusterID: "test", Partitions: 4, HTTPListen: "127.0.0.1:0",
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
			// A long lease (testLeaseTTL): with 2 s, under the race
			// detector on a loaded machine, leases expired and the cluster
			// did not settle within a minute in a CI run.
			Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: testLeaseTTL,
				Username: user, Password: pass, CompactionInterval: 200 * time.Millisecond,
				// The first connection logs in (bcrypt, in a race-built etcd
				// sharing the machine): 5 s, the default, ran out in a CI run.
				DialTimeout: 30 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		ns = append(ns, n)
	}
	// Generous: under the race detector on a loaded machine an etcd with
	// authentication (bcrypt on every login, in the same race-built
	// process) took more than 20 s to let both nodes settle.
	waitClusterSettled(t, 2*time.Minute, ns...)
	return ns
}

// TestClusterCompactsEtcdHistory: the nodes of a cluster compact etcd's
// history, and keep working across it: commits, and a topic created through
// one node reaching the other after its watch's history was compacted away.
func TestClusterCompactsEtcdHistory(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const prefix = "/compacted/"
	logs := logTail{silent: true}
	ns := startCompacting(t, ec, prefix, "", "", &logs)
	root := ec.Client(t)

	adm := kadm.NewClient(client(t, ns[0].Addr()))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	commit := func(at int64) { commitUntilOwned(ctx, t, adm, "g", "events", at) }
	commit(1)
	early, err := root.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	// etcd's history up to the commit goes within a few intervals, while
	// the nodes keep committing.
	at := int64(2)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node logs:\n%s", logs.String())
		}
	})
	testwait.For(t, 20*time.Second, "etcd's history compacted past the first commit", func() bool {
		commit(at)
		at++
		_, err := root.Get(ctx, prefix, clientv3.WithRev(early.Header.Revision))
		return errors.Is(err, rpctypes.ErrCompacted)
	})

	// A topic created through node 1 reaches node 2 (its watch set up at
	// start has had its history compacted), and the offsets are there.
	if _, err := ns[0].Catalog().Create("after-compaction", 3, nil); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "node 2 sees the topic created after the compaction", func() bool {
		_, ok := ns[1].Catalog().Lookup("after-compaction")
		return ok
	})
	commit(at)
	fetched, err := kadm.NewClient(client(t, ns[1].Addr())).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("events", 0); !ok || o.At != at {
		t.Fatalf("offset fetched through node 2: %+v, want %d", o, at)
	}
	if l := logs.String(); strings.Contains(l, "compacting etcd") {
		t.Fatalf("a node failed to compact:\n%s", l)
	}
	compacted := 0.0
	for _, n := range ns {
		m := scrapeMetrics(t, n.HTTPAddr())
		compacted += m.value("cohort_cluster_etcd_compactions_total", "result", "compacted")
		if f := m.value("cohort_cluster_etcd_compactions_total", "result", "failed"); f != 0 {
			t.Errorf("node %s counted %v failed compactions", n.Addr(), f)
		}
	}
	if compacted < 1 {
		t.Fatalf("the nodes counted %v compactions", compacted)
	}
}

// TestClusterCompactionDeniedWarnsOnce: etcd with authentication lets only
// root compact; a node whose etcd user is not root says so once, and does
// not try again (Compactor.Run returns).
func TestClusterCompactionDeniedWarnsOnce(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	const prefix, pass = "/authed/", "etcd-pass-c0mp"
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": pass})
	logs := logTail{silent: true}
	ns := startCompacting(t, ec, prefix, "cohort", pass, &logs)
	testwait.For(t, 10*time.Second, "both nodes warning", func() bool {
		return strings.Count(logs.String(), "may not compact") >= 2
	})
	// Each node has by now stepped several times had it gone on (the
	// cluster took longer than an interval to settle).
	// Only the compaction warnings are counted: on a slow machine (the race
	// detector) a node's lease may also expire and be renewed, which warns
	// of its own.
	if l := logs.String(); strings.Count(l, "may not compact") != 2 || !strings.Contains(l, "--auto-compaction-retention") {
		t.Fatalf("want one warning per node naming etcd's own compaction, got:\n%s", l)
	}
	for _, n := range ns {
		m := scrapeMetrics(t, n.HTTPAddr())
		if d, c := m.value("cohort_cluster_etcd_compactions_total", "result", "denied"), m.value("cohort_cluster_etcd_compactions_total", "result", "compacted"); d != 1 || c != 0 {
			t.Errorf("node %s: %v denied and %v compacted, want 1 and 0", n.Addr(), d, c)
		}
	}
}

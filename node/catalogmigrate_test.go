package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/disk"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// legacyCatalog is the one record older nodes kept every topic in, holding
// topics t0..t(n-1) with i+1 partitions each.
func legacyCatalog(t *testing.T, n int) []byte {
	t.Helper()
	old := catalog.New(catalog.Options{})
	for i := range n {
		if _, err := old.Create(fmt.Sprint("t", i), int32(i+1), nil); err != nil {
			t.Fatal(err)
		}
	}
	return old.Snapshot()
}

// checkTopics fails unless c holds exactly t0..t(n-1) with i+1 partitions
// each (and the extra topics named).
func checkTopics(t *testing.T, c *catalog.Catalog, n int, extra ...string) {
	t.Helper()
	if c.Len() != n+len(extra) {
		t.Fatalf("the catalog has %d topics, want %d", c.Len(), n+len(extra))
	}
	for i := range n {
		if tp, ok := c.Lookup(fmt.Sprint("t", i)); !ok || tp.Partitions != int32(i+1) {
			t.Fatalf("topic t%d: %+v %v, want %d partitions", i, tp, ok, i+1)
		}
	}
	for _, e := range extra {
		if _, ok := c.Lookup(e); !ok {
			t.Fatalf("topic %s is missing", e)
		}
	}
}

// TestCatalogMovedToPerTopicRecords: a data directory written by a node that
// kept the catalog in one record starts with every topic, moved to one record
// per topic (a record already written by a move cut short is kept over the
// old one's), the old record deleted; changes and a restart after it keep
// them.
func TestCatalogMovedToPerTopicRecords(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var logged testlog.Buffer
	dir := t.TempDir()
	st, err := disk.Open(disk.Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	grown := catalog.New(catalog.Options{})
	if _, err := grown.Create("t7", 50, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Append(ctx, CatalogPartition, []store.Record{
		{Key: []byte(legacyCatalogKey), Value: legacyCatalog(t, n)},
		{Key: []byte(topicRecordPrefix + "t7"), Value: grown.TopicRecords()["t7"]},
		{Key: []byte(groupConfigPrefix + "g"), Value: []byte(`{"version":1,"configs":{"consumer.session.timeout.ms":"60000"}}`)},
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	nd, err := Start(Config{Listen: "127.0.0.1:0", DataDir: dir, Partitions: 5, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// The log says what the move did: n-1 records written, t7's kept.
	if want := fmt.Sprintf(`msg="topic catalog moved to one record per topic" written=%d already_had_record=1`, n-1); !strings.Contains(logged.String(), want) {
		t.Fatalf("the log does not say %s:\n%s", want, logged.String())
	}
	if tp, _ := nd.Catalog().Lookup("t7"); tp.Partitions != 50 {
		t.Fatalf("t7 has %d partitions, want the per-topic record's 50", tp.Partitions)
	}
	if _, err := nd.Catalog().AddPartitions("t7", 60, nil); err != nil {
		t.Fatal(err)
	}
	if err := nd.Catalog().Delete("t0"); err != nil {
		t.Fatal(err)
	}
	if _, err := nd.Catalog().Create("new", 3, nil); err != nil {
		t.Fatal(err)
	}
	if got := nd.Catalog().GroupConfig("g"); got["consumer.session.timeout.ms"] != "60000" {
		t.Fatalf("group configs after the move: %v", got)
	}
	nd.Close()

	st, err = disk.Open(disk.Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	if err := st.Load(ctx, CatalogPartition, func(r store.Record) error {
		keys[string(r.Key)] = len(r.Value)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, ok := keys[legacyCatalogKey]; ok {
		t.Fatal("the old one-record catalog is still stored")
	}
	for i := 1; i < n; i++ {
		if keys[fmt.Sprint(topicRecordPrefix, "t", i)] == 0 {
			t.Fatalf("no record for topic t%d", i)
		}
	}
	if _, ok := keys[topicRecordPrefix+"t0"]; ok {
		t.Fatal("the deleted topic's record is still stored")
	}

	nd, err = Start(Config{Listen: "127.0.0.1:0", DataDir: dir, Partitions: 5, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	if tp, _ := nd.Catalog().Lookup("t7"); tp.Partitions != 60 {
		t.Fatalf("after a restart t7 has %d partitions, want 60", tp.Partitions)
	}
	if _, ok := nd.Catalog().Lookup("t0"); ok || nd.Catalog().Len() != n {
		t.Fatalf("after a restart: %d topics, t0 present %v", nd.Catalog().Len(), ok)
	}
}

// emptiedCluster starts etcd and a node on it, closes the node and deletes
// the topic records it wrote, returning a client of that etcd, the key of
// the one-record catalog and the prefix of the per-topic records.
func emptiedCluster(t *testing.T) (ec *etcdtest.Cluster, cli *clientv3.Client, legacyKey, prefix string) {
	t.Helper()
	ec = etcdtest.Start(t, 1)
	first := startCluster848(t, ec, 1, nil)
	legacyKey = first[0].cl.st.RecordKey(CatalogPartition, []byte(legacyCatalogKey))
	prefix = first[0].cl.st.RecordKey(CatalogPartition, []byte(topicRecordPrefix))
	first[0].Close()
	cli = ec.Client(t)
	if _, err := cli.Delete(context.Background(), prefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	return ec, cli, legacyKey, prefix
}

// TestClusterCatalogMovedToPerTopicRecords: nodes starting together on an
// etcd that holds the one-record catalog of older nodes move it once to
// per-topic records and all see every topic; changes then flow between them
// through the per-topic records.
func TestClusterCatalogMovedToPerTopicRecords(t *testing.T) {
	ec, cli, legacyKey, prefix := emptiedCluster(t)
	ctx := context.Background()
	const n = 250 // more than one transaction's worth
	if _, err := cli.Put(ctx, legacyKey, string(legacyCatalog(t, n))); err != nil {
		t.Fatal(err)
	}
	// Both start at once: each finds the old record, and the one that
	// moves it second finds it gone or moved meanwhile.
	ns := make([]*Node, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns[i], errs[i] = Start(Config{Listen: "127.0.0.1:0", NodeID: int32(i + 1), ClusterID: "test", Partitions: k848Parts,
				Logger:  slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
				Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: k848Prefix, LeaseTTL: testLeaseTTL}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		t.Cleanup(func() { ns[i].Close() })
	}
	for _, nd := range ns {
		checkTopics(t, nd.Catalog(), n)
	}
	if r, err := cli.Get(ctx, legacyKey); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("the old record after the move: %v, %d keys", err, len(r.Kvs))
	}
	r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || r.Count != n {
		t.Fatalf("per-topic records: %v, %d, want %d", err, r.Count, n)
	}
	if _, err := ns[0].Catalog().Create("through-0", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := ns[1].Catalog().Delete("t3"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "each node sees the other's change", func() bool {
		_, a := ns[1].Catalog().Lookup("through-0")
		_, b := ns[0].Catalog().Lookup("t3")
		return a && !b
	})
}

// TestClusterCatalogMoveKeepsStoredRecords: in cluster mode the move writes
// only the topics that have no record of their own yet, leaves the records
// already there as they are, and its log line counts both apart.
func TestClusterCatalogMoveKeepsStoredRecords(t *testing.T) {
	ec, cli, legacyKey, prefix := emptiedCluster(t)
	ctx := context.Background()
	const n = 5
	grown := catalog.New(catalog.Options{})
	for _, name := range []string{"t1", "t3"} {
		if _, err := grown.Create(name, 40, nil); err != nil {
			t.Fatal(err)
		}
	}
	recs := grown.TopicRecords()
	for _, name := range []string{"t1", "t3"} {
		if _, err := cli.Put(ctx, prefix+catalog.TopicKey(name), string(recs[catalog.TopicKey(name)])); err != nil {
			t.Fatal(err)
		}
	}
	revs := map[string]int64{}
	for _, name := range []string{"t1", "t3"} {
		r, err := cli.Get(ctx, prefix+catalog.TopicKey(name))
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("reading %s: %v", name, err)
		}
		revs[name] = r.Kvs[0].ModRevision
	}
	if _, err := cli.Put(ctx, legacyKey, string(legacyCatalog(t, n))); err != nil {
		t.Fatal(err)
	}
	var logged testlog.Buffer
	nd, err := Start(Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: k848Parts,
		Logger:  slog.New(slog.NewTextHandler(&logged, nil)),
		Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: k848Prefix, LeaseTTL: testLeaseTTL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.Close() })
	if want := `msg="cluster: topic catalog moved to one record per topic" written=3 already_had_record=2`; !strings.Contains(logged.String(), want) {
		t.Fatalf("the log does not say %s:\n%s", want, logged.String())
	}
	for _, name := range []string{"t1", "t3"} {
		if tp, _ := nd.Catalog().Lookup(name); tp.Partitions != 40 {
			t.Fatalf("%s has %d partitions, want its own record's 40", name, tp.Partitions)
		}
		r, err := cli.Get(ctx, prefix+catalog.TopicKey(name))
		if err != nil || len(r.Kvs) != 1 || r.Kvs[0].ModRevision != revs[name] {
			t.Fatalf("%s's own record was written again by the move: %v %v", name, err, r.Kvs)
		}
	}
	if tp, _ := nd.Catalog().Lookup("t4"); tp.Partitions != 5 {
		t.Fatalf("t4 has %d partitions, want the old record's 5", tp.Partitions)
	}
}

package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterCatalogNeverRollsBack: a node that creates topics one after
// another never loses one it already has: the etcd events of its own earlier
// writes, arriving after it stored a later one, must not roll its catalog
// back (a topic missing there for a moment has its offsets deleted).
func TestClusterCatalogNeverRollsBack(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ns := startCluster848(t, ec, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, ns[0].Addr()))
	cat := ns[0].Catalog()
	var created atomic.Int32 // topics t0 … t(created-1) exist
	lost := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			n := created.Load()
			if n < 0 {
				return
			}
			for i := range n {
				if _, ok := cat.Lookup(fmt.Sprint("t", i)); !ok {
					select {
					case lost <- fmt.Sprint("t", i):
					default:
					}
					return
				}
			}
		}
	}()
	for i := range 60 {
		if r, err := adm.CreateTopics(ctx, 1, 1, nil, fmt.Sprint("t", i)); err != nil || r.Error() != nil {
			t.Fatalf("create t%d: %v %v", i, err, r.Error())
		}
		created.Store(int32(i + 1))
		select {
		case name := <-lost:
			t.Fatalf("node 1's catalog lost %s after creating t%d", name, i)
		default:
		}
	}
	created.Store(-1)
	<-done
	select {
	case name := <-lost:
		t.Fatalf("node 1's catalog lost %s", name)
	default:
	}
}

// TestClusterCatalogConcurrentChanges: topics created at the same time
// through two nodes, and configs of one group set at the same time through
// both, are all kept: each node writes the shared record only if nobody
// changed it since the node last read it, and otherwise applies its change
// again to the newer record.
func TestClusterCatalogConcurrentChanges(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ns := startCluster848(t, ec, 2, nil)
	const each, configs = 15, catalog.MaxGroupConfigs / 2
	errs := make(chan error, 2*each)
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Straight to each node's catalog: Kafka clients send
			// CreateTopics to the controller, one node.
			for j := range each {
				name := fmt.Sprintf("n%d-t%d", i, j)
				if _, err := n.Catalog().Create(name, 1, nil); err != nil {
					errs <- fmt.Errorf("create %s: %v", name, err)
				}
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			cat := n.Catalog()
			for j := range configs {
				name := fmt.Sprintf("n%d-c%d", i, j)
				err := cat.UpdateGroupConfig("g", false, func(cur map[string]string) (map[string]string, error) {
					if cur == nil {
						cur = map[string]string{}
					}
					cur[name] = "1"
					return cur, nil
				})
				if err != nil {
					errs <- fmt.Errorf("set %s: %v", name, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var want []string
	for i := range ns {
		for j := range each {
			want = append(want, fmt.Sprintf("n%d-t%d", i, j))
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, n := range ns {
		for {
			var missing []string
			for _, name := range want {
				if _, ok := n.Catalog().Lookup(name); !ok {
					missing = append(missing, name)
				}
			}
			cfg := n.Catalog().GroupConfig("g")
			for k := range ns {
				for j := range configs {
					if _, ok := cfg[fmt.Sprintf("n%d-c%d", k, j)]; !ok {
						missing = append(missing, fmt.Sprintf("config n%d-c%d", k, j))
					}
				}
			}
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d lacks %d of %d topics and configs: %v", i, len(missing), 2*(each+configs), missing)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestClusterCatalogTooLargeForEtcd: a change that would make a topic's
// record larger than etcd accepts fails with a message saying so
// before it is sent (not gRPC's or etcd's bare refusal, nor the record's
// binary key), and changes nothing.
func TestClusterCatalogTooLargeForEtcd(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ns := startCluster848(t, ec, 1, nil)
	racks := make([][]string, catalog.MaxPartitions)
	for p := range racks {
		racks[p] = []string{fmt.Sprintf("rack-%010d", p), fmt.Sprintf("rack-%010d", p+1)}
	}
	_, err := ns[0].Catalog().Create("wide", catalog.MaxPartitions, racks)
	if !errors.Is(err, catalog.ErrPersist) {
		t.Fatalf("creating a topic whose racks exceed etcd's request limit: %v, want ErrPersist", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `the record of topic "wide" would take`) || !strings.Contains(msg, "one record may hold") || !utf8.ValidString(msg) {
		t.Fatalf("message %q: want it to name the topic catalog and etcd's limit, in UTF-8", msg)
	}
	if _, ok := ns[0].Catalog().Lookup("wide"); ok {
		t.Fatal("the topic that could not be stored is in the catalog")
	}
	if _, err := ns[0].Catalog().Create("narrow", 1, nil); err != nil {
		t.Fatalf("a small change after the failed one: %v", err)
	}
}

// TestClusterCatalogNeverOverwritesWhatItCannotRead: a topic's record this
// node cannot read (a later version's) is never written over: changes of
// that topic fail until a node that reads it writes one this node can;
// other topics are not held up.
func TestClusterCatalogNeverOverwritesWhatItCannotRead(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ns := startCluster848(t, ec, 1, nil)
	cli := ec.Client(t)
	ctx := context.Background()
	key := ns[0].cl.st.RecordKey(CatalogPartition, []byte(topicRecordPrefix+catalog.TopicKey("later")))
	later := `{"version":2,"topics":[],"something":"new"}`
	if _, err := cli.Put(ctx, key, later); err != nil {
		t.Fatal(err)
	}
	// The node's watch reports the record and fails to take it; a change
	// must not succeed over it, now or after the watch has tried.
	for i := range 3 {
		if _, err := ns[0].Catalog().Create("later", 1, nil); !errors.Is(err, catalog.ErrPersist) {
			t.Fatalf("creating a topic over a record this node cannot read: %v, want ErrPersist", err)
		}
		if _, err := ns[0].Catalog().Create(fmt.Sprint("other-", i), 1, nil); err != nil {
			t.Fatalf("creating another topic: %v", err)
		}
		r, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Kvs[0].Value) != later {
			t.Fatalf("the record was overwritten with %s", r.Kvs[0].Value)
		}
		time.Sleep(100 * time.Millisecond) // let the watch try again
	}
}

// TestClusterCatalogForgetsDeletedKeys: a node keeps no revision for a
// topic that was deleted, whichever node deleted it: the watch's event of
// the deletion used to leave an entry (revision 0) on every node for good,
// so a cluster whose applications create and delete topics grew every
// node's map by one entry per topic ever deleted. A reread of the whole
// prefix (the watch restarting) forgets keys deleted meanwhile too.
func TestClusterCatalogForgetsDeletedKeys(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ns := startCluster848(t, ec, 2, nil)
	revs := func(n *Node) int {
		n.cl.keys.mu.Lock()
		defer n.cl.keys.mu.Unlock()
		return len(n.cl.keys.rev)
	}
	base := []int{revs(ns[0]), revs(ns[1])}
	const churn = 30
	for i := range churn {
		name := fmt.Sprint("churn-", i)
		if _, err := ns[0].Catalog().Create(name, 1, nil); err != nil {
			t.Fatal(err)
		}
		if err := ns[0].Catalog().Delete(name); err != nil {
			t.Fatal(err)
		}
	}
	// A topic created through each node and seen by the other: each node's
	// watch has then handled every deletion before it (events come in
	// order).
	for i, n := range ns {
		mark := fmt.Sprint("mark-", i)
		if _, err := n.Catalog().Create(mark, 1, nil); err != nil {
			t.Fatal(err)
		}
		other := ns[1-i]
		testwait.For(t, 20*time.Second, "the other node sees "+mark, func() bool {
			_, ok := other.Catalog().Lookup(mark)
			return ok
		})
	}
	for i, n := range ns {
		// The two markers at most (a node may learn of its own through
		// its write and of the other's through the watch).
		if got := revs(n); got > base[i]+2 {
			t.Errorf("node %d keeps %d revisions after %d topics were created and deleted (%d before, 2 topics created since)", i+1, got, churn, base[i])
		}
	}

	// A key deleted while the watch was down is dropped by the reread of
	// the prefix that follows.
	keys := ns[0].cl.keys
	prefix := ns[0].cl.st.RecordKey(CatalogPartition, []byte(topicRecordPrefix))
	gone := prefix + catalog.TopicKey("deleted-unwatched")
	keys.setRev(gone, 12345)
	if err := keys.syncPrefix(context.Background(), prefix, ns[0].Catalog().SyncTopics); err != nil {
		t.Fatal(err)
	}
	keys.mu.Lock()
	_, kept := keys.rev[gone]
	keys.mu.Unlock()
	if kept {
		t.Errorf("the reread of the topics kept the revision of a key it did not find")
	}
}

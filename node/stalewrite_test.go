package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/testkafka"
	"github.com/cohort-dev/cohort/internal/testwait"
	etcdstore "github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// etcdNews holds back, while held, every answer a node's etcd client
// receives on its watch and lease keepalive streams, and records the
// transactions it sends and whether etcd applied them. A held node learns
// nothing from etcd but the answers to its own requests: neither that its
// lease was revoked (its keepalives go unanswered) nor that its partition
// keys went and another node took them (its watch delivers nothing), as
// for a node whose watch lags behind etcd.
type etcdNews struct {
	mu   sync.Mutex
	held chan struct{} // closed when released; nil while not held
	txns []txnSeen
}

// txnSeen is one transaction a node sent and etcd answered.
type txnSeen struct {
	keys    []string // the keys its success branch puts
	applied bool     // etcd's answer: its compares held and it applied the puts
}

func (s txnSeen) String() string { return fmt.Sprintf("{puts %q applied %v}", s.keys, s.applied) }

// hold holds back every stream answer received from now on.
func (e *etcdNews) hold() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.held == nil {
		e.held = make(chan struct{})
	}
}

// release lets the held answers through; it may be called more than once.
func (e *etcdNews) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.held != nil {
		close(e.held)
		e.held = nil
	}
}

// gate is the channel a received stream answer waits on (nil: none).
func (e *etcdNews) gate() chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.held
}

// writesTo returns the transactions seen so far that put a key starting
// with prefix.
func (e *etcdNews) writesTo(prefix string) []txnSeen {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []txnSeen
	for _, tx := range e.txns {
		for _, k := range tx.keys {
			if strings.HasPrefix(k, prefix) {
				out = append(out, tx)
				break
			}
		}
	}
	return out
}

type heldStream struct {
	grpc.ClientStream
	e *etcdNews
}

// RecvMsg waits, after the message has come, for the release if the
// answers are held: a receive already waiting when hold was called holds
// back what it gets too.
func (s heldStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if g := s.e.gate(); g != nil {
		select {
		case <-g:
		case <-s.Context().Done():
			return s.Context().Err()
		}
	}
	return err
}

func (e *etcdNews) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			tr, ok := req.(*pb.TxnRequest)
			if resp, answered := reply.(*pb.TxnResponse); ok && answered && err == nil {
				seen := txnSeen{applied: resp.Succeeded}
				for _, op := range tr.Success {
					if put := op.GetRequestPut(); put != nil {
						seen.keys = append(seen.keys, string(put.Key))
					}
				}
				e.mu.Lock()
				e.txns = append(e.txns, seen)
				e.mu.Unlock()
			}
			return err
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || (method != watchMethod && method != keepAliveMethod) {
				return s, err
			}
			return heldStream{s, e}, nil
		}),
	}
}

// TestClusterStaleOwnerWriteFencedByEtcd: a node that still believes it
// coordinates a group after its lease was revoked and another node took the
// group's partition over sends an OffsetCommit to etcd, and etcd's
// ownership compare is all that stops it. The node (1) learns nothing from
// etcd meanwhile (etcdNews holds back its watch and keepalive answers) and
// its lease clock stands still, so by its own view it owns the partition
// and its lease holds. etcd must refuse the write (the transaction's
// compare of the partition's ownership key fails), the client must get
// NOT_COORDINATOR (it looks the coordinator up again and retries), and the
// partition's records in etcd must be as the successor (node 2) left them.
// TestFencingSIGSTOP in package cluster cannot show this: its resumed node
// hears of its lost lease from etcd before the commit comes. Both ways
// the coordinator writes: a transaction per partition, and shared ones
// (MultiAppend).
func TestClusterStaleOwnerWriteFencedByEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd")
	}
	t.Run("Append", func(t *testing.T) { staleOwnerWrite(t, false) })
	t.Run("MultiAppend", func(t *testing.T) { staleOwnerWrite(t, true) })
}

func staleOwnerWrite(t *testing.T, multi bool) {
	ec := etcdtest.Start(t, 1)
	ecli := ec.Client(t)
	const prefix = "/stale-write/"
	news := &etcdNews{}
	clk1 := &leaseClock{}
	start := func(id int32, cc *ClusterConfig) *Node { return startClusterNode(t, id, cc, nil) }
	n1 := start(1, &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: testLeaseTTL, CompactionInterval: -1,
		MultiAppend: multi, clock: clk1, dialOptions: news.dialOptions()})
	t.Cleanup(news.release) // before n1 closes: its etcd client's streams end
	n2 := start(2, &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: testLeaseTTL, CompactionInterval: -1,
		MultiAppend: multi})
	waitClusterSettled(t, 20*time.Second, n1, n2)

	g := groupOwnedBy(t, n1, 1, "stale")
	p := coordinator.PartitionFor(g, k848Parts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl1, cl2 := client(t, n1.Addr(), byname.Opt()), client(t, n2.Addr(), byname.Opt())
	commit := func(cl *kgo.Client, off int64) int16 {
		t.Helper()
		resp, err := testkafka.SimpleCommitRequest(g, "t", 0, off).RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// The partition may still be loading (COORDINATOR_LOAD_IN_PROGRESS).
	testwait.For(t, 20*time.Second, "a commit on node 1, the owner", func() bool { return commit(cl1, 10) == 0 })

	// From here node 1 hears nothing from etcd, and its lease holds in
	// its own view whatever time the rest takes.
	clk1.Freeze()
	news.hold()
	revokeNodeLease(t, ec, prefix, 1)
	testwait.For(t, 20*time.Second, "node 2 serving the partition and taking a commit", func() bool {
		return n2.Cluster().Owned(p) && commit(cl2, 20) == 0
	})
	if !n1.Cluster().Owned(p) || !n1.Cluster().Serving() {
		t.Fatalf("node 1 no longer believes it owns partition %d (owned %v, serving %v): the test would not reach etcd's check",
			p, n1.Cluster().Owned(p), n1.Cluster().Serving())
	}
	st, err := etcdstore.New(etcdstore.Options{Client: ecli, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	data := st.RecordKey(p, nil) // the prefix of the partition's records
	before := partitionKVs(ctx, t, ecli, data)
	if len(before) == 0 {
		t.Fatalf("no records of partition %d in etcd after node 2's commit", p)
	}
	writes0 := len(news.writesTo(data))

	code := commit(cl1, 999)
	writes := news.writesTo(data)[writes0:]
	t.Logf("node 1's commit after it lost the partition: error code %d; its transactions on the partition's records: %s", code, writes)
	if code != 16 {
		t.Errorf("node 1, a stale owner, answered a commit with %d, want NOT_COORDINATOR (16)", code)
	}
	if len(writes) == 0 {
		t.Errorf("node 1 sent etcd no transaction on partition %d's records: refused before etcd's check, which this test is about", p)
	}
	for _, w := range writes {
		if w.applied {
			t.Errorf("etcd applied node 1's stale write of %q", w.keys)
		}
	}
	if after := partitionKVs(ctx, t, ecli, data); after != before {
		t.Errorf("partition %d's records in etcd changed by the stale owner's write:\nbefore %s\nafter  %s", p, before, after)
	}
	// What node 2 answers, from its memory, for the clients.
	if got := testkafka.FetchOffsets(t, cl2, g, "t", 1, 20*time.Second).Topics[0].Partitions[0].Offset; got != 20 {
		t.Errorf("offset on node 2 after the stale write: %d, want 20", got)
	}
	// Let node 1 hear from etcd again: it gives the partition up.
	news.release()
	testwait.For(t, 20*time.Second, "node 1 giving the partition up once it hears from etcd", func() bool { return !n1.Cluster().Owned(p) })
}

// partitionKVs is every key under data in etcd with its value and the
// revision it was last changed at, as text.
func partitionKVs(ctx context.Context, t *testing.T, cli *clientv3.Client, data string) string {
	t.Helper()
	r, err := cli.Get(ctx, data, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, kv := range r.Kvs {
		fmt.Fprintf(&b, "%q=%q@%d ", kv.Key, kv.Value, kv.ModRevision)
	}
	return b.String()
}

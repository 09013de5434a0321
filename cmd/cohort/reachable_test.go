package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/internal/testlease"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// testLeaseTTL is the etcd lease of the cluster-mode nodes of the tests in
// which no lease is meant to run out (node closes revoke theirs): a node
// presumes its lease lost after about TTL - TTL/3 - TTL/10 without an
// answered keepalive, so a 2 s lease was lost whenever the test process
// stalled for about 1.1 s on a loaded machine; 10 s allows about 5.7 s.
const testLeaseTTL = 10 * time.Second

// TestUnreachable: only failures to connect count (a node that is down),
// also inside kadm's per-broker errors; an answer, even an error, does not.
func TestUnreachable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{dial, true},
		{errors.Join(errors.New("unable to dial"), dial), true},
		{&kadm.ShardErrors{Errs: []kadm.ShardError{{Err: dial}, {Err: dial}}}, true},
		{&kadm.ShardErrors{Errs: []kadm.ShardError{{Err: dial}, {Err: errors.New("GROUP_AUTHORIZATION_FAILED")}}}, false},
		{&net.OpError{Op: "read", Err: errors.New("reset")}, false},
		{context.DeadlineExceeded, false},
		// No node serves the group right now (a partition between two
		// owners, or loading): asked again too.
		{kerr.CoordinatorNotAvailable, true},
		{fmt.Errorf("describe g: %w", kerr.NotCoordinator), true},
		{kerr.CoordinatorLoadInProgress, true},
		{&kadm.ShardErrors{Errs: []kadm.ShardError{{Err: dial}, {Err: kerr.CoordinatorNotAvailable}}}, true},
		{kerr.GroupIDNotFound, false},
	} {
		if got := unreachable(tc.err); got != tc.want {
			t.Errorf("unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestUntilReachable: an operation that cannot connect is run again until
// it can, within the context; at the context's end the connection failure
// is returned, not the context's error; any other result ends it at once.
func TestUntilReachable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	v, err := untilReachable(ctx, nil, func() (int, error) {
		if calls++; calls < 3 {
			return 0, dial
		}
		return 42, nil
	})
	if v != 42 || err != nil || calls != 3 {
		t.Fatalf("got %d, %v after %d calls", v, err, calls)
	}
	calls = 0
	answer := errors.New("GROUP_ID_NOT_FOUND")
	if _, err := untilReachable(ctx, nil, func() (int, error) { calls++; return 0, answer }); err != answer || calls != 1 {
		t.Fatalf("an answer was retried: %v, %d calls", err, calls)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel2()
	if _, err := untilReachable(short, nil, func() (int, error) { return 0, dial }); err != dial {
		t.Fatalf("at the deadline: %v, want the dial error", err)
	}
}

// TestDescribeWaitsForTheCoordinator: a group's coordinator that refuses
// connections for a while (a node that died, until its partitions move) is
// asked again until it answers, within --timeout.
func TestDescribeWaitsForTheCoordinator(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "1")
	commit(t, n.Addr(), "orders", "events", map[int32]int64{0: 5})
	var dials, refused atomic.Int32
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RequestRetries(0),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			// The first connection (the seed broker's) works; the next
			// three dials, the coordinator's, are refused.
			if i := dials.Add(1); i >= 2 && i <= 4 {
				refused.Add(1)
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
			}
			return d.DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := describeGroups(ctx, cl, []string{"orders"})
	if err != nil || len(gs) != 1 || gs[0].Group != "orders" {
		t.Fatalf("describe: %v %+v", err, gs)
	}
	if refused.Load() < 3 {
		t.Fatalf("the coordinator was refused %d times: the test did not exercise the retry", refused.Load())
	}
}

// TestCommandsFollowAMovedCoordinator: in cluster mode, a group whose
// coordinator stops (here: its connections refused, then the node closed,
// so its partitions move to the other node) is described, and its offsets
// fetched, through the node that takes it over, within --timeout: the
// client must look the coordinator up again rather than keep dialling the
// one it knew, and must wait out COORDINATOR_NOT_AVAILABLE while the
// partition has no owner.
func TestCommandsFollowAMovedCoordinator(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var nodes []*node.Node
	for id := range int32(2) {
		n, err := node.Start(node.Config{Listen: "127.0.0.1:0", NodeID: id + 1, ClusterID: "test", Partitions: 4,
			Store: nil, Logger: quiet, Cluster: &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/moved/", LeaseTTL: testLeaseTTL}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := cli{t: t, base: []string{"--bootstrap", nodes[0].Addr() + "," + nodes[1].Addr()}}
	c.ok("topic", "create", "events", "--partitions", "1")
	// Every node's catalog has the topic before it is committed by ID
	// (a node that has not seen it yet answers UNKNOWN_TOPIC_ID, as a
	// Kafka broker does before the topic reaches its metadata).
	for _, n := range nodes {
		testwait.For(t, 10*time.Second, "the topic in every node's catalog", func() bool {
			_, ok := n.Catalog().Lookup("events")
			return ok
		})
	}
	// A group node 2 coordinates, with an offset.
	seed := kadm.NewClient(kgoClient(t, kgo.SeedBrokers(nodes[0].Addr(), nodes[1].Addr())))
	var g string
	for i := 0; g == "" && ctx.Err() == nil; i++ {
		cand := fmt.Sprintf("group-%d", i%64)
		if r := seed.FindGroupCoordinators(ctx, cand)[cand]; r.Err == nil && r.NodeID == 2 {
			g = cand
		} else if i%64 == 63 {
			time.Sleep(100 * time.Millisecond) // partitions not all owned yet
		}
	}
	if g == "" {
		t.Fatal("no group coordinated by node 2")
	}
	// The offset reaches 7 through offsets reset, whose own OffsetCommit
	// (by name) is asked of node 1 and must be sent on to node 2, the
	// group's coordinator.
	commit(t, nodes[0].Addr(), g, "events", map[int32]int64{0: 3})
	viaOne := cli{t: t, base: []string{"--bootstrap", nodes[0].Addr()}}
	if out := table(viaOne.ok("offsets", "reset", g, "--topic", "events:0", "--to-offset", "7", "--execute")); !strings.HasSuffix(out, "committed 1 offsets of group "+g) {
		t.Fatalf("reset through node 1:\n%s", out)
	}

	var refuse atomic.Bool
	var d net.Dialer
	dead := nodes[1].Addr()
	cl := kgoClient(t, kgo.SeedBrokers(nodes[0].Addr(), nodes[1].Addr()),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if refuse.Load() && host == dead {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
			}
			return d.DialContext(ctx, network, host)
		}))
	if gs, err := describeGroups(ctx, cl, []string{g}); err != nil || len(gs) != 1 {
		t.Fatalf("describe before the move: %v", err)
	}
	refuse.Store(true)
	nodes[1].Close()
	tctx, tcancel := context.WithTimeout(ctx, 20*time.Second)
	defer tcancel()
	gs, err := describeGroups(tctx, cl, []string{g})
	if err != nil || len(gs) != 1 || gs[0].Coordinator == nil || gs[0].Coordinator.NodeID != 1 {
		t.Fatalf("describe after the move: %v %+v", err, gs)
	}
	adm := kadm.NewClient(cl)
	r, err := untilReachable(tctx, cl, func() (kadm.OffsetResponses, error) { return adm.FetchOffsets(tctx, g) })
	if err != nil {
		t.Fatalf("offsets after the move: %v", err)
	}
	if o, ok := r.Lookup("events", 0); !ok || o.At != 7 {
		t.Fatalf("offset after the move: %+v", o)
	}
}

func kgoClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestCommandsRideOutADeadNode: `cohort groups`, and `cohort group history`
// of a group the dead node coordinated, run right after a node of a cluster
// died (SIGKILL: its registration and partitions stay in etcd until its
// lease ends, so Metadata still lists it and FindCoordinator still names
// it) ask again until the node is gone and its partitions have moved, within
// the default --timeout (10 s), as docs/cli.md says of groups, describe and
// offsets. Both failed at once: ListGroups goes to every node, and one
// shard's dial error ended the command ("request ListGroups has 1 separate
// shard errors, first: unable to dial"); group history dialled the dead
// coordinator once. The dead node's lease ends when the test says, once
// the command has failed to reach it and is asking again (the test revokes
// it, as etcd does when the TTL runs out); its TTL outlasts the command's
// --timeout, so no command could succeed without asking again.
func TestCommandsRideOutADeadNode(t *testing.T) {
	t.Parallel() // with the other parallel tests; each subtest has its own etcd and nodes
	for _, tc := range []struct {
		name string
		args func(g string) []string
		want func(g, out string) bool
	}{
		{"groups", func(string) []string { return []string{"groups"} },
			func(g, out string) bool { return strings.HasPrefix(out, "GROUP") }},
		{"history", func(g string) []string { return []string{"group", "history", g} },
			func(g, out string) bool { return !strings.Contains(out, "error") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, g, kill := clusterWithDoomedNode(t)
			retried := make(chan error, 1)
			retryWatchers.Store(c.base[1], func(err error) {
				select {
				case retried <- err:
				default:
				}
			})
			t.Cleanup(func() { retryWatchers.Delete(c.base[1]) })
			expire := kill()
			type result struct {
				out, errOut string
				code        int
			}
			done := make(chan result, 1)
			go func() {
				out, errOut, code := c.run(tc.args(g)...)
				done <- result{out, errOut, code}
			}()
			select {
			case err := <-retried:
				t.Logf("%v failed to reach the dead node 2 (%v) and asks again: ending node 2's lease", tc.args(g), err)
			case r := <-done:
				t.Fatalf("%v ended without asking again while node 2 was dead and listed: exit %d\n%s\n%s", tc.args(g), r.code, r.out, r.errOut)
			}
			expire()
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second): // a guard: --timeout ends it within 10 s
				t.Fatalf("%v still running after 60 s", tc.args(g))
			}
			if r.code != 0 || !tc.want(g, r.out) {
				t.Fatalf("%v right after node 2 died: exit %d\n%s\n%s", tc.args(g), r.code, r.out, r.errOut)
			}
		})
	}
}

// retryWatchers maps a --bootstrap address to the function called before
// each retry of a command run with it (testRetrying), for the tests that
// wait for a command to be asking again.
var retryWatchers sync.Map

func init() {
	testRetrying = func(cl *kgo.Client, err error) {
		if cl == nil { // TestUntilReachable retries without a client
			return
		}
		seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
		for _, s := range seeds {
			if f, ok := retryWatchers.Load(s); ok {
				f.(func(error))(err)
			}
		}
	}
}

// groupOfNode2 waits (bounded) until node 1 (n1) of a two-node cluster of
// 4 partitions serves its share, node 2 the other, and returns a group id
// that node 2 coordinates.
func groupOfNode2(t *testing.T, n1 *node.Node) string {
	t.Helper()
	testwait.For(t, 30*time.Second, "node 2 serving its share", func() bool {
		return len(n1.Cluster().Brokers()) == 2 && len(n1.Cluster().OwnedPartitions()) == 2
	})
	for i := 0; ; i++ {
		if g := fmt.Sprintf("group-%d", i); n1.Cluster().Owner(coordinator.PartitionFor(g, 4)) == 2 {
			return g
		}
	}
}

// doomedLeaseTTL is the etcd lease of the nodes of clusterWithDoomedNode:
// three times the commands' default --timeout, so that only the test ends
// the dead node's lease in time (expire), and long enough that a loaded
// machine does not cost node 1 its lease.
const doomedLeaseTTL = 30 * time.Second

// clusterWithDoomedNode starts node 1 in-process and node 2 as a child
// process (4 partitions), and a group node 2 coordinates, with a committed
// offset. It returns a cli that knows node 1 only (its base is
// --bootstrap and node 1's address), the group, and kill, which SIGKILLs
// node 2, checks that node 1 still lists it, and returns expire, which
// ends node 2's lease in etcd (as etcd does when the TTL runs out).
func clusterWithDoomedNode(t *testing.T) (cli, string, func() (expire func())) {
	ec := etcdtest.Start(t, 1)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	n1, err := node.Start(node.Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 4,
		Logger: quiet, Cluster: &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/dead/", LeaseTTL: doomedLeaseTTL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n1.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	child := cohortCommand(ctx, t, "serve", "--listen", closedAddr(t), "--node-id", "2", "--partitions", "4",
		"--etcd", ec.Endpoints()[0], "--etcd-prefix", "/dead/", "--lease-ttl", doomedLeaseTTL.String(), "--cluster-id", "test",
		"--log-level", "error")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	g := groupOfNode2(t, n1)
	c := cli{t: t, base: []string{"--bootstrap", n1.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "1")
	adm, actx := adminOf(t, n1.Addr())
	var last error
	if !testwait.Until(20*time.Second, func() bool { // once node 2's catalog has the topic
		rs, err := adm.CommitOffsets(actx, g, kadm.OffsetsFromRecords(kgo.Record{Topic: "events", Offset: 2}))
		if err == nil {
			err = rs.Error()
		}
		last = err
		return err == nil
	}) {
		t.Fatalf("committing for %s: %v", g, last)
	}
	return c, g, func() func() {
		child.Process.Kill()
		child.Wait()
		if len(n1.Cluster().Brokers()) != 2 {
			t.Fatal("node 2 left the registry at once: the test does not exercise a dead node still listed")
		}
		return func() { testlease.Revoke(t, ec.Client(t), "/dead/", 2) }
	}
}

package cluster_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/testchild"
	"github.com/cohort-dev/cohort/internal/testkafka"
	"github.com/cohort-dev/cohort/internal/testlease"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

const (
	partitions = 50
	prefix     = "/cohort-test/"
)

// testLeaseTTL is the etcd lease of the tests' nodes. No test waits for a
// lease to run out: a node that dies or freezes has its lease ended by the
// test (expireLease), so the lease can be long. A short one was lost by
// healthy nodes of a test process that did not run for about
// TTL - TTL/3 - TTL/10 (1.1 s of a 2 s lease), which a loaded 2-core
// machine can do; a node that closes revokes its lease, so a long one
// costs nothing.
const testLeaseTTL = 10 * time.Second

// expireLease ends node id's lease in etcd now, as etcd does when the
// lease's TTL runs out (testlease.Revoke): its registration and the
// partition keys it held go, and the other nodes take its partitions over.
// For a node that is killed or frozen, in place of waiting out its TTL.
func expireLease(t *testing.T, ec *etcdtest.Cluster, id int32) {
	t.Helper()
	testlease.Revoke(t, ec.Client(t), prefix, id)
}

// TestMain doubles as the child-process node: with COHORT_TEST_CHILD_NODE set
// the test binary runs one cluster-mode node until it is killed (the SIGKILL
// and SIGSTOP tests need a real process whose cleanup never runs).
func TestMain(m *testing.M) {
	if os.Getenv("COHORT_TEST_CHILD_NODE") != "" {
		runChild()
		return
	}
	os.Exit(m.Run())
}

func runChild() {
	if msg := os.Getenv("COHORT_TEST_CHILD_PANIC"); msg != "" {
		panic(msg) // a child that dies before its node starts (TestChildEndsBeforeAddr)
	}
	id, _ := strconv.Atoi(os.Getenv("COHORT_TEST_NODE_ID"))
	ttl, _ := time.ParseDuration(os.Getenv("COHORT_TEST_TTL"))
	n, err := node.Start(nodeConfig(int32(id), strings.Split(os.Getenv("COHORT_TEST_ETCD"), ","), ttl,
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("ADDR", n.Addr())
	n.Wait()
}

func nodeConfig(id int32, eps []string, ttl time.Duration, log *slog.Logger) node.Config {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	return node.Config{
		Listen: "127.0.0.1:0", NodeID: id, ClusterID: "test", Partitions: partitions, Group: cfg, Logger: log,
		Cluster: &node.ClusterConfig{Endpoints: eps, Prefix: prefix, LeaseTTL: ttl},
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startNode starts an in-process cluster-mode node, closed at the end of the
// test (closing twice is harmless for the tests that stop it themselves).
func startNode(t *testing.T, ec *etcdtest.Cluster, id int32, ttl time.Duration) *node.Node {
	t.Helper()
	log := quiet()
	if os.Getenv("COHORT_TEST_VERBOSE") != "" {
		log = slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	n, err := node.Start(nodeConfig(id, ec.Endpoints(), ttl, log))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { n.Close() }) })
	return n
}

// child is a node in a child process (internal/testchild: this test binary
// run again, its TestMain starting the node).
type child struct {
	*testchild.Child
	addr string
	id   int32
}

// childStartWait is how long startChild waits for a child node to give its
// address.
const childStartWait = 60 * time.Second

func startChild(t testing.TB, ec *etcdtest.Cluster, id int32, ttl time.Duration) *child {
	t.Helper()
	return startChildEnv(t, id, childStartWait, "COHORT_TEST_TTL="+ttl.String(), "COHORT_TEST_ETCD="+strings.Join(ec.Endpoints(), ","))
}

// startChildEnv starts child node id with env added to its environment and
// waits, at most within, for the address it prints once its node has
// started. A child that ends first (its standard output closes) fails the
// test as soon as it has, and one that does not answer in time fails it
// then, each with how it ended and its last lines of standard error.
func startChildEnv(t testing.TB, id int32, within time.Duration, env ...string) *child {
	t.Helper()
	c, out := testchild.Start(t, append([]string{"COHORT_TEST_CHILD_NODE=1", fmt.Sprintf("COHORT_TEST_NODE_ID=%d", id)}, env...)...)
	line := make(chan string, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for out.Scan() {
			select {
			case line <- out.Text():
			default:
			}
		}
	}()
	first := func(l string) *child {
		if !strings.HasPrefix(l, "ADDR ") {
			t.Fatalf("child node %d: %s; %s", id, l, c.Report())
		}
		return &child{Child: c, addr: strings.TrimPrefix(l, "ADDR "), id: id}
	}
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	select {
	case l := <-line:
		return first(l)
	case <-ended:
		select {
		case l := <-line: // its first line, read before the end
			return first(l)
		default:
		}
		t.Fatalf("child node %d ended before it gave its address: %s", id, c.Report())
	case <-timeout.C:
		t.Fatalf("child node %d gave no address in %v: %s", id, within, c.Report())
	}
	return nil
}

// waitSettled waits (bounded) until every given node sees every partition
// held by its target owner and serves its own share.
func waitSettled(t *testing.T, within time.Duration, nodes ...*node.Node) time.Duration {
	t.Helper()
	return waitSettledWithout(t, within, -1, nodes...)
}

// waitSettledWithout is waitSettled where, in addition, node gone holds no
// partition.
func waitSettledWithout(t *testing.T, within time.Duration, gone int32, nodes ...*node.Node) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	holds := func(n *node.Node) bool {
		for p := int32(0); p < partitions; p++ {
			if n.Cluster().Owner(p) == gone {
				return true
			}
		}
		return false
	}
	for {
		ok := true
		for _, n := range nodes {
			if !n.Cluster().Settled() || (gone >= 0 && holds(n)) {
				ok = false
				select {
				case <-n.Cluster().Changed():
				case <-time.After(100 * time.Millisecond):
				case <-deadline:
					for _, n := range nodes {
						t.Logf("node %s: owns %v", n.Addr(), n.Cluster().OwnedPartitions())
					}
					t.Fatalf("cluster not settled after %v", within)
				}
				break
			}
		}
		if ok {
			return time.Since(start)
		}
	}
}

// groupsOn returns k group names whose coordinator partition is owned by
// node id (in n's view).
func groupsOn(n *node.Node, id int32, prefix string, k int) []string {
	var out []string
	for i := 0; len(out) < k && i < 100000; i++ {
		g := fmt.Sprintf("%s-%d", prefix, i)
		if n.Cluster().Owner(coordinator.PartitionFor(g, partitions)) == id {
			out = append(out, g)
		}
	}
	return out
}

func newClient(t *testing.T, addrs ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), byname.Opt(), kgo.RetryTimeout(30*time.Second),
		kgo.DialTimeout(time.Second), kgo.RequestTimeoutOverhead(3*time.Second), kgo.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// pollStable calls stable (each call bounded to 5 s) until it reports true or
// within has passed, and returns how long it took.
func pollStable(t *testing.T, what string, within time.Duration, stable func(context.Context) (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var why string
	if !testwait.Until(within, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ok, w := stable(ctx)
		why = w
		return ok
	}) {
		t.Fatalf("%s not stable after %v: %s", what, within, why)
	}
	return time.Since(start)
}

// committer commits growing offsets to groups (as simple, member-less
// commits) and remembers what was acknowledged.
type committer struct {
	mu     sync.Mutex
	acked  map[string]int64 // group -> highest acknowledged offset (partition 0 of topic "t")
	acks   int
	errs   int
	stop   chan struct{}
	done   sync.WaitGroup
	groups []string
}

func startCommitter(t *testing.T, addrs []string, groups []string) *committer {
	c := &committer{acked: map[string]int64{}, stop: make(chan struct{}), groups: groups}
	for i, g := range groups {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), byname.Opt(), kgo.RetryTimeout(2*time.Second),
			kgo.DialTimeout(500*time.Millisecond), kgo.RequestRetries(2))
		if err != nil {
			t.Fatal(err)
		}
		c.done.Add(1)
		go func(i int, g string) {
			defer c.done.Done()
			defer cl.Close()
			for off := int64(1); off < 1_000_000; off++ {
				select {
				case <-c.stop:
					return
				default:
				}
				req := testkafka.SimpleCommitRequest(g, "t", 0, off)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				resp, err := req.RequestWith(ctx, cl)
				cancel()
				c.mu.Lock()
				if err == nil && resp.Topics[0].Partitions[0].ErrorCode == 0 {
					c.acked[g] = off
					c.acks++
				} else {
					c.errs++
				}
				c.mu.Unlock()
				if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
					// Retry pacing while no node answers for the
					// group (the failover under test), ended by stop.
					select {
					case <-c.stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		}(i, g)
	}
	return c
}

func (c *committer) counts() (acks, errs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acks, c.errs
}

// waitAcks waits (bounded) until n more commits were acknowledged.
func (c *committer) waitAcks(t *testing.T, n int, within time.Duration) {
	t.Helper()
	a0, _ := c.counts()
	if !testwait.Until(within, func() bool { a, _ := c.counts(); return a >= a0+n }) {
		t.Fatalf("fewer than %d commits acknowledged in %v", n, within)
	}
}

// verify stops the committers and checks that every acknowledged offset is
// stored (the latest acknowledged, or a later one).
func (c *committer) verify(t *testing.T, cl *kgo.Client) {
	t.Helper()
	close(c.stop)
	c.done.Wait()
	for _, g := range c.groups {
		got := testkafka.FetchOffsets(t, cl, g, "t", 1, 20*time.Second).Topics[0].Partitions[0].Offset
		c.mu.Lock()
		want := c.acked[g]
		c.mu.Unlock()
		if got < want {
			t.Errorf("group %s: stored offset %d, acknowledged %d: an acknowledged commit was lost", g, got, want)
		}
	}
	a, e := c.counts()
	t.Logf("commits: %d acknowledged, %d failed (retriable)", a, e)
}

func splitHostPort(a string) (string, string, error) { return net.SplitHostPort(a) }

// fatalTB is a testing.TB whose Fatal and Fatalf record the message and end
// the calling goroutine, for a test of a helper that must fail its test.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Fatal(args ...any) { f.fail(fmt.Sprint(args...)) }

func (f *fatalTB) Fatalf(format string, args ...any) { f.fail(fmt.Sprintf(format, args...)) }

func (f *fatalTB) fail(msg string) {
	f.mu.Lock()
	f.msg = msg
	f.mu.Unlock()
	runtime.Goexit()
}

// message is the recorded failure ("" if none).
func (f *fatalTB) message() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

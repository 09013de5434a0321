package clients

// Stock clients on a cohort cluster whose node coordinating their groups
// goes away. cluster/kgo_failover_test.go does this for franz-go; here the
// work-distribution examples of sarama, kafka-go, confluent-kafka-go
// (librdkafka) and kafka-python (and kafkajs when installed) run one group
// each, two members per group, on three nodes sharing etcd. Node 1 is a
// `cohort serve` child process that coordinates every group and, as the
// lowest id, leads the catalog topic's partitions in Metadata; it is
// stopped with SIGTERM or killed with SIGKILL (and its lease then ended in
// etcd by the test, as when its TTL runs out). Nodes 2 and 3 run in
// process, their Taps feeding the journal, so what the clients do after the
// failover is seen in full.

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testbin"
	"github.com/cohort-dev/cohort/internal/testkafka"
	"github.com/cohort-dev/cohort/internal/testlease"
	"github.com/cohort-dev/cohort/internal/testport"
	"github.com/cohort-dev/cohort/internal/testready"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

const (
	cfPartitions = 50 // coordinator partitions of every node
	cfPrefix     = "/cohort-failover/"
	// cfLeaseTTL is the nodes' etcd lease. The test waits for no TTL: it
	// revokes the lease of the killed node at once, so the lease can be
	// long, which keeps a loaded machine from costing the survivors
	// theirs (a node presumes its lease lost about TTL - TTL/3 - TTL/10
	// after its last answered keepalive).
	cfLeaseTTL = 10 * time.Second
	// cfRecover bounds the time from the stop or kill until every group is
	// Stable on a survivor with both members heartbeating there and
	// owning the topic between them: the lease's end (kill), the session
	// timeout of members evicted meanwhile, kafka-go's 5 s JoinGroupBackoff
	// (docs/workdist.md) and a rebalance, with room to spare.
	cfRecover = 25 * time.Second
	// cfRecoverKafkajs is kafkajs's bound. Its consumer keeps sending to
	// the node that went (as it does when a Kafka broker goes), gives up
	// after its five retries (about 9 s: "Crash: KafkaJSNumberOfRetriesExceeded")
	// and restarts itself after a backoff of up to ~13 s: it recovered in
	// 24–30 s here (docs/compatibility.md).
	cfRecoverKafkajs = 60 * time.Second
)

// recoverBound is cfRecover, or cfRecoverKafkajs for kafkajs.
func recoverBound(client string) time.Duration {
	if client == "kafkajs" {
		return cfRecoverKafkajs
	}
	return cfRecover
}

// cfCluster is the three nodes.
type cfCluster struct {
	t       *testing.T
	etcd    *clientv3.Client
	victim  *testready.Child // node 1
	vaddr   string
	nodes   []*node.Node // nodes 2 and 3
	journal *testbed.Journal

	mu       sync.Mutex
	beats    map[string]int           // client id -> heartbeats a survivor answered without error
	fetches  map[string]map[int32]int // client id -> partition -> Fetches a survivor answered
	leaders  []int32                  // leaders survivors named in Metadata for the topic, in answer order
	lastSeen map[string]time.Time     // member id -> its last heartbeat, join, sync or commit a survivor answered
	warnings []string
}

func startCFCluster(t *testing.T) *cfCluster {
	t.Helper()
	ec := etcdtest.Start(t, 1) // skips under -short
	c := &cfCluster{t: t, etcd: ec.Client(t), journal: testbed.NewJournal(), beats: map[string]int{}, fetches: map[string]map[int32]int{},
		lastSeen: map[string]time.Time{}}
	c.vaddr = testport.Reserve(t)
	victim := exec.Command(testbin.Cohort(t), "serve", "--etcd", strings.Join(ec.Endpoints(), ","), "--etcd-prefix", cfPrefix,
		"--lease-ttl", cfLeaseTTL.String(), "--node-id", "1", "--listen", c.vaddr, "--cluster-id", "failover",
		"--partitions", fmt.Sprint(cfPartitions), "--initial-rebalance-delay", "0", "--min-session-timeout", "1s",
		"--log-level", "warn")
	victim.Stderr = nodeLog{c, "node 1"}
	victim.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.victim = testready.Start(t, victim, 20*time.Second) // its store (etcd) open, its listener served
	t.Cleanup(func() { c.victim.Process.Kill(); c.victim.Wait() })
	for id := int32(2); id <= 3; id++ {
		gc := group.Defaults()
		gc.InitialRebalanceDelay = 0
		gc.MinSessionTimeout = time.Second
		n, err := node.Start(node.Config{
			Listen: "127.0.0.1:0", NodeID: id, ClusterID: "failover", Partitions: cfPartitions, Group: gc,
			Logger:  slog.New(slog.NewTextHandler(nodeLog{c, fmt.Sprintf("node %d", id)}, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Tap:     c.tap,
			Cluster: &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: cfPrefix, LeaseTTL: cfLeaseTTL},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		c.nodes = append(c.nodes, n)
	}
	if !testwait.Until(30*time.Second, func() bool { return c.settled(false) }) {
		t.Fatal("the cluster did not settle")
	}
	return c
}

// nodeLog keeps a node's log lines (warn and above) and shows them.
type nodeLog struct {
	c    *cfCluster
	name string
}

func (w nodeLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.c.mu.Lock()
		w.c.warnings = append(w.c.warnings, w.name+": "+line)
		w.c.mu.Unlock()
		w.c.t.Logf("%s: %s", w.name, line)
	}
	return len(p), nil
}

func (c *cfCluster) tap(cl server.Client, req kmsg.Request, resp kmsg.Response) {
	c.journal.Tap(cl, req, resp)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch q := req.(type) {
	case *kmsg.FetchRequest:
		if c.fetches[cl.ID] == nil {
			c.fetches[cl.ID] = map[int32]int{}
		}
		for _, tp := range q.Topics {
			if q.Version < 13 && tp.Topic != bareTopic {
				continue
			}
			for _, p := range tp.Partitions {
				c.fetches[cl.ID][p.Partition]++
			}
		}
	case *kmsg.HeartbeatRequest:
		c.lastSeen[q.MemberID] = time.Now()
		if resp.(*kmsg.HeartbeatResponse).ErrorCode == 0 {
			c.beats[cl.ID]++
		}
	case *kmsg.JoinGroupRequest:
		c.lastSeen[q.MemberID] = time.Now()
	case *kmsg.SyncGroupRequest:
		c.lastSeen[q.MemberID] = time.Now()
	case *kmsg.OffsetCommitRequest:
		c.lastSeen[q.MemberID] = time.Now()
	case *kmsg.MetadataRequest:
		for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
			if mt.Topic != nil && *mt.Topic == bareTopic {
				for _, p := range mt.Partitions {
					c.leaders = append(c.leaders, p.Leader)
				}
			}
		}
	}
}

func (c *cfCluster) addrs() string {
	return strings.Join([]string{c.vaddr, c.nodes[0].Addr(), c.nodes[1].Addr()}, ",")
}

// groupOnVictim returns a group name starting with prefix whose
// coordinator is node 1.
func (c *cfCluster) groupOnVictim(prefix string) string {
	for i := 0; i < 10000; i++ {
		g := fmt.Sprintf("%s-%d", prefix, i)
		if c.nodes[0].Cluster().Owner(coordinator.PartitionFor(g, cfPartitions)) == 1 {
			return g
		}
	}
	c.t.Fatal("no group coordinated by node 1")
	return ""
}

// settled reports whether nodes 2 and 3 serve their share and see every
// coordinator partition owned: with node 1 among the brokers, or (gone)
// with node 1 holding none.
func (c *cfCluster) settled(gone bool) bool {
	for _, n := range c.nodes {
		if !n.Cluster().Settled() {
			return false
		}
		brokers := len(n.Cluster().Brokers())
		if !gone && brokers != 3 || gone && brokers != 2 {
			return false
		}
		for p := int32(0); p < cfPartitions; p++ {
			if o := n.Cluster().Owner(p); o < 0 || gone && o == 1 {
				return false
			}
		}
	}
	return true
}

// cfGroup is one client's group.
type cfGroup struct {
	client  workdistClient
	name    string
	workers []*worker
}

// exclusive reports whether the workers' printed ownership gives each
// worker some partitions and every partition to exactly one worker.
func (g *cfGroup) exclusive() (bool, string) {
	seen := map[int32][]string{}
	for _, w := range g.workers {
		ps, _ := w.printed()
		if len(ps) == 0 {
			return false, w.clientID + " owns nothing"
		}
		for _, p := range ps {
			seen[p] = append(seen[p], w.clientID)
		}
	}
	for p := int32(0); p < barePartitions; p++ {
		if len(seen[p]) != 1 {
			return false, fmt.Sprintf("partition %d owned by %v", p, seen[p])
		}
	}
	return true, ""
}

// checkTimeline puts the workers' printed ownership changes in the order
// of their callbacks' times and reports a partition assigned to one worker
// while another had not yet given it up, unless the coordinator had by then
// evicted that other worker's member (evicted: member id → when its session
// ran out, see sessionEvictions). Such a member is a zombie: cut off from
// the coordinator (kafkajs keeps retrying the node that went for about 9 s,
// longer than a 6 s session), it prints its partitions lost only when its
// client gives up, after the coordinator has already handed them on; no
// client can avoid that without fencing, and the coordinator's own record
// (CheckNoOverlap: one owner per generation) is checked apart.
func (g *cfGroup) checkTimeline(evicted map[string]time.Time) (excused []string, err error) {
	type change struct {
		o ownership
		w string
	}
	var all []change
	for _, w := range g.workers {
		w.mu.Lock()
		for _, o := range w.events {
			if o.at == 0 {
				w.mu.Unlock()
				return nil, fmt.Errorf("%s printed %s %v without a time", w.clientID, o.kind, o.parts)
			}
			all = append(all, change{o, w.clientID})
		}
		w.mu.Unlock()
	}
	slices.SortStableFunc(all, func(a, b change) int { return cmp.Compare(a.o.at, b.o.at) })
	owner := map[int32]change{} // partition → the assignment in force
	for _, c := range all {
		for _, p := range c.o.parts {
			o, owned := owner[p]
			switch {
			case c.o.kind != "assigned":
				if owned && o.w == c.w {
					delete(owner, p)
				}
			case owned && o.w != c.w:
				at, ok := evicted[o.o.member]
				if !ok || o.o.member == "" || at.UnixNano() > c.o.at {
					return excused, fmt.Errorf("partition %d printed assigned by %s at %d while %s (member %s) still owned it",
						p, c.w, c.o.at, o.w, o.o.member)
				}
				excused = append(excused, fmt.Sprintf("partition %d assigned to %s at %d while %s still printed it owned, its member %s evicted at %d",
					p, c.w, c.o.at, o.w, o.o.member, at.UnixNano()))
				fallthrough // a zombie's partition: the new owner's
			default:
				owner[p] = c
			}
		}
	}
	return excused, nil
}

// sessionEvictions returns the members a survivor evicted for an expired
// session, and when, as its group history records them, keeping only those
// the test saw no request from (Tap: heartbeat, join, sync, commit) for
// about a session before: a survivor that evicted a member it was hearing
// from would be at fault, and its overlaps are not excused.
func sessionEvictions(doc *group.HistoryDoc, lastSeen map[string]time.Time, session time.Duration) map[string]time.Time {
	out := map[string]time.Time{}
	if doc == nil {
		return out
	}
	for _, ev := range doc.History {
		for _, c := range append([]group.Cause{ev.Cause}, ev.MoreCauses...) {
			if c.Kind != group.CauseSessionTimeout || c.MemberID == "" {
				continue
			}
			if last, ok := lastSeen[c.MemberID]; ok && c.At.Sub(last) < session*99/100 {
				continue
			}
			if at, ok := out[c.MemberID]; !ok || c.At.Before(at) {
				out[c.MemberID] = c.At
			}
		}
	}
	return out
}

// TestClusterFailover: each client's group, coordinated by node 1, on a
// three-node cluster; node 1 stops (SIGTERM: it hands its partitions over
// at once) or is killed (SIGKILL: they move when its lease expires, which
// the test makes happen at once by revoking it in etcd). Every
// client must find the new coordinator, keep each partition with one
// member at a time, find its committed offsets there, follow the catalog
// partitions' new leader for its fetches, and recover within cfRecover
// (kafkajs within cfRecoverKafkajs).
func TestClusterFailover(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own bed or node
	for _, how := range []string{"stop", "kill"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel() // each has its own etcd, nodes and ports
			runClusterFailover(t, how == "kill")
		})
	}
}

func runClusterFailover(t *testing.T, kill bool) {
	cc := startCFCluster(t)
	if _, err := cc.nodes[0].Catalog().Create(bareTopic, barePartitions, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second+cfRecoverKafkajs)
	defer cancel()
	var groups []*cfGroup
	for _, c := range workdistClients {
		switch {
		case c.name == "franzgo": // cluster/kgo_failover_test.go
			continue
		case c.name == "kcat": // prints no times, commits nothing
			continue
		case c.name == "kafkajs" && !haveKafkajs():
			leaveOut(t, kafkajsWhat, kafkajsHint)
			continue
		case c.name == "kafkapython" && !haveKafkaPython():
			leaveOut(t, kafkaPythonWhat, kafkaPythonHint)
			continue
		}
		g := &cfGroup{client: c, name: cc.groupOnVictim("failover-" + c.name)}
		g.workers = append(g.workers, startWorker(t, c, cc.addrs(), g.name, c.name+"-1"))
		groups = append(groups, g)
	}
	// The second member joins once the first owns the whole topic, so that
	// every partition is revoked once and committed (the workers commit
	// at a revocation; two members joining in the same rebalance would
	// commit nothing).
	for _, g := range groups {
		if err := testbed.WaitFor(ctx, g.client.name+"'s first member owning the topic", func() bool { ok, _ := g.exclusive(); return ok }); err != nil {
			t.Fatal(err)
		}
		g.workers = append(g.workers, startWorker(t, g.client, cc.addrs(), g.name, g.client.name+"-2"))
	}
	for _, g := range groups {
		if err := testbed.WaitFor(ctx, g.client.name+" members sharing the topic", func() bool { ok, _ := g.exclusive(); return ok }); err != nil {
			t.Fatal(err)
		}
	}
	// Every partition committed on node 1 before it goes.
	v := newFailoverClient(t, cc.vaddr)
	for _, g := range groups {
		if err := testbed.WaitFor(ctx, g.client.name+"'s commits on node 1", func() bool { return committed(ctx, v, g.name) }); err != nil {
			t.Fatal(err)
		}
	}
	v.Close()

	cc.mu.Lock()
	clear(cc.beats)
	clear(cc.fetches)
	cc.mu.Unlock()
	start := time.Now()
	if kill {
		cc.victim.Process.Kill()
	} else {
		cc.victim.Process.Signal(syscall.SIGTERM)
	}
	cc.victim.Wait()
	if kill {
		testlease.Revoke(t, cc.etcd, cfPrefix, 1) // what etcd does when its TTL runs out
	}
	if !testwait.Until(cfRecover, func() bool { return cc.settled(true) }) {
		t.Fatal("the partitions did not leave node 1")
	}
	moved := time.Since(start)
	cc.mu.Lock()
	metadataFrom := len(cc.leaders)
	cc.mu.Unlock()
	survivors := newFailoverClient(t, cc.nodes[0].Addr(), cc.nodes[1].Addr())
	for _, g := range groups {
		// The offsets committed on node 1 are there on the new coordinator.
		resp := testkafka.FetchOffsets(t, survivors, g.name, bareTopic, barePartitions, 10*time.Second)
		for _, p := range resp.Topics[0].Partitions {
			if p.Offset < 0 {
				t.Errorf("%s: partition %d has no committed offset after the failover", g.name, p.Partition)
			}
		}
	}
	// Every group is watched at once, each against its own bound, so
	// that a slow client's time is not charged to the ones after it.
	bound := cfRecover
	for _, g := range groups {
		bound = max(bound, recoverBound(g.client.name))
	}
	deadline, cancelRecover := context.WithTimeout(ctx, bound-time.Since(start))
	defer cancelRecover()
	recoveredAt := make([]time.Duration, len(groups))
	why := make([]string, len(groups))
	testbed.WaitFor(deadline, "every group stable on a survivor", func() bool {
		done := true
		for i, g := range groups {
			if recoveredAt[i] != 0 || time.Since(start) > recoverBound(g.client.name) {
				continue // recovered, or over its bound (reported below)
			}
			if why[i] = g.recovered(deadline, cc, survivors); why[i] == "" {
				recoveredAt[i] = time.Since(start)
			} else {
				done = false
			}
		}
		return done
	})
	for i, g := range groups {
		if recoveredAt[i] == 0 || recoveredAt[i] > recoverBound(g.client.name) {
			t.Fatalf("%s not recovered within %v after node 1 went: %s", g.client.name, recoverBound(g.client.name), why[i])
		}
		t.Logf("%s: recovered, seen %v after node 1 went (partitions moved after %v)", g.client.name,
			recoveredAt[i].Round(time.Millisecond), moved.Round(time.Millisecond))
	}
	cc.mu.Lock()
	for i, l := range cc.leaders[metadataFrom:] {
		if l != 2 {
			t.Errorf("Metadata answer %d after the failover names leader %d for a partition, want node 2", i, l)
			break
		}
	}
	cc.mu.Unlock()
	for _, g := range groups {
		doc := describeHistory(t, ctx, survivors, g.name)
		cc.mu.Lock()
		evicted := sessionEvictions(doc, cc.lastSeen, bareSession)
		cc.mu.Unlock()
		for m, at := range evicted {
			t.Logf("%s: a survivor evicted %s at %d (session timeout)", g.client.name, m, at.UnixNano())
		}
		excused, err := g.checkTimeline(evicted)
		for _, e := range excused {
			t.Logf("%s: excused (a zombie): %s", g.client.name, e)
		}
		if err != nil {
			t.Errorf("%s: %v", g.client.name, err)
		}
		for _, err := range []error{cc.journal.CheckNoOverlap(g.name), cc.journal.CheckCommitFencing(g.name), cc.journal.CheckFetchesSeeCommits(g.name)} {
			if err != nil {
				t.Errorf("%s: %v", g.client.name, err)
			}
		}
	}
	cc.mu.Lock()
	for _, w := range cc.warnings {
		if !strings.HasPrefix(w, "node 1") {
			t.Errorf("a survivor logged: %s", w)
		}
	}
	cc.mu.Unlock()
	if t.Failed() {
		for _, g := range groups {
			cc.journal.Dump(t, g.name)
		}
	}
}

// recovered returns why the group has not recovered yet ("" once it has):
// Stable on a survivor with both members, each heartbeating there, owning
// the topic between them and fetching each partition it owns from a
// survivor.
func (g *cfGroup) recovered(ctx context.Context, cc *cfCluster, cl *kgo.Client) string {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{g.name}
	resp, err := req.RequestWith(dctx, cl)
	if err != nil {
		return err.Error()
	}
	if d := resp.Groups[0]; d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != len(g.workers) {
		return fmt.Sprintf("code %d, state %s, %d members", d.ErrorCode, d.State, len(d.Members))
	}
	if ok, why := g.exclusive(); !ok {
		return why
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, w := range g.workers {
		if cc.beats[w.clientID] == 0 {
			return w.clientID + " had no heartbeat answered by a survivor"
		}
		ps, _ := w.printed()
		for _, p := range ps {
			if cc.fetches[w.clientID][p] == 0 {
				return fmt.Sprintf("%s did not fetch its partition %d from a survivor", w.clientID, p)
			}
		}
	}
	return ""
}

// leaveOut is needTool for one client of a test that runs several: the
// test goes on without it, except in CI, where its absence fails the test.
func leaveOut(t *testing.T, what, hint string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed; %s (.ci/run does this)", what, hint)
	}
	t.Logf("LEFT OUT: %s is not installed; %s to run it too", what, hint)
}

func newFailoverClient(t *testing.T, addrs ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DialTimeout(time.Second), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// committed reports whether every partition of the topic has an offset
// committed by the group, as cl's broker answers.
func committed(ctx context.Context, cl *kgo.Client, group string) bool {
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := testkafka.OffsetFetchRequest(group, bareTopic, barePartitions).RequestWith(rctx, cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != barePartitions {
		return false
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Offset < 0 {
			return false
		}
	}
	return true
}

// TestCheckTimeline: the failover's two-owners check fails a partition
// assigned to one worker while another still prints it owned, unless the
// coordinator had evicted that other worker's member (a zombie) before the
// assignment; and sessionEvictions keeps only evictions of members the
// survivors had not heard from for a session.
func TestCheckTimeline(t *testing.T) {
	s := int64(time.Second)
	line := func(kind string, at int64, member string, parts ...int32) ownership {
		return ownership{kind: kind, parts: parts, member: member, at: at}
	}
	zombie := []ownership{line("assigned", 1*s, "a-1", 0, 1), line("lost", 12*s, "a-1", 0, 1)}
	for _, c := range []struct {
		name    string
		a, b    []ownership
		evicted map[string]time.Time
		wantOK  bool
	}{
		{"revoked then assigned", []ownership{line("assigned", 1*s, "a-1", 0, 1), line("revoked", 2*s, "a-1", 0, 1)},
			[]ownership{line("assigned", 3*s, "b-1", 0, 1)}, nil, true},
		{"assigned while the other still owns it", zombie,
			[]ownership{line("assigned", 8*s, "b-1", 0, 1)}, nil, false},
		{"assigned after the owner's member was evicted", zombie,
			[]ownership{line("assigned", 8*s, "b-1", 0, 1)}, map[string]time.Time{"a-1": time.Unix(7, 0)}, true},
		{"assigned before the owner's member was evicted", zombie,
			[]ownership{line("assigned", 6*s, "b-1", 0, 1)}, map[string]time.Time{"a-1": time.Unix(7, 0)}, false},
		{"another member of the owner was evicted", zombie,
			[]ownership{line("assigned", 8*s, "b-1", 0, 1)}, map[string]time.Time{"a-0": time.Unix(7, 0)}, false},
		{"no time printed", []ownership{{kind: "assigned", parts: []int32{0}}}, nil, nil, false},
	} {
		g := &cfGroup{workers: []*worker{{clientID: "a", events: c.a}, {clientID: "b", events: c.b}}}
		excused, err := g.checkTimeline(c.evicted)
		if (err == nil) != c.wantOK {
			t.Errorf("%s: checkTimeline = %v, want ok %v", c.name, err, c.wantOK)
		}
		if wantExcused := c.evicted != nil && c.wantOK; (len(excused) > 0) != wantExcused {
			t.Errorf("%s: excused %q, want some: %v", c.name, excused, wantExcused)
		}
	}

	at := time.Unix(100, 0)
	doc := &group.HistoryDoc{History: []group.RebalanceEvent{{
		Cause: group.Cause{Kind: group.CauseSessionTimeout, MemberID: "quiet", At: at},
		MoreCauses: []group.Cause{
			{Kind: group.CauseSessionTimeout, MemberID: "heard", At: at},
			{Kind: group.CauseMemberLeft, MemberID: "left", At: at},
			{Kind: group.CauseSessionTimeout, MemberID: "silent", At: at},
		},
	}}}
	lastSeen := map[string]time.Time{"heard": at.Add(-2 * time.Second), "silent": at.Add(-7 * time.Second)}
	got := sessionEvictions(doc, lastSeen, 6*time.Second)
	want := map[string]time.Time{"quiet": at, "silent": at}
	if len(got) != len(want) || !got["quiet"].Equal(at) || !got["silent"].Equal(at) {
		t.Errorf("sessionEvictions = %v, want %v", got, want)
	}
}

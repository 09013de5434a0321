package cluster_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testkafka"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// kgoGroup is one franz-go consumer group (kgo's own group management and
// range balancer) whose members commit offsets of the partitions they own.
// cohort serves no records, so the members never consume; kgo's fetch path
// retries in the background while group membership runs normally.
type kgoGroup struct {
	mu     sync.Mutex
	owned  map[int]map[int32]bool // member index -> partitions
	acked  map[int32]int64        // partition -> highest acknowledged commit
	stop   chan struct{}
	done   sync.WaitGroup
	group  string
	topic  string
	nParts int32
}

func startKgoGroup(t *testing.T, seeds []string, group, topic string, nParts int32, members int) *kgoGroup {
	t.Helper()
	g := &kgoGroup{owned: map[int]map[int32]bool{}, acked: map[int32]int64{},
		stop: make(chan struct{}), group: group, topic: topic, nParts: nParts}
	for i := 0; i < members; i++ {
		i := i
		var cl *kgo.Client
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(seeds...),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.RangeBalancer()),
			kgo.SessionTimeout(10*time.Second),
			kgo.RebalanceTimeout(10*time.Second),
			kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.DisableAutoCommit(),
			kgo.DialTimeout(time.Second),
			kgo.RetryTimeout(30*time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, c *kgo.Client, m map[string][]int32) {
				g.mu.Lock()
				defer g.mu.Unlock()
				if g.owned[i] == nil {
					g.owned[i] = map[int32]bool{}
				}
				for _, p := range m[topic] {
					g.owned[i][p] = true
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, c *kgo.Client, m map[string][]int32) {
				g.mu.Lock()
				defer g.mu.Unlock()
				for _, p := range m[topic] {
					delete(g.owned[i], p)
				}
			}),
			kgo.OnPartitionsLost(func(_ context.Context, c *kgo.Client, m map[string][]int32) {
				g.mu.Lock()
				defer g.mu.Unlock()
				for _, p := range m[topic] {
					delete(g.owned[i], p)
				}
			}),
		)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		g.done.Add(1)
		go func() { // commit the owned partitions' next offsets, through kgo's group client
			defer g.done.Done()
			for off := int64(1); off < 1_000_000; off++ {
				select {
				case <-g.stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				g.mu.Lock()
				var ps []int32
				for p := range g.owned[i] {
					ps = append(ps, p)
				}
				g.mu.Unlock()
				if len(ps) == 0 {
					continue
				}
				offs := map[string]map[int32]kgo.EpochOffset{topic: {}}
				for _, p := range ps {
					offs[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: off}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var acked []int32
				cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
					if err != nil {
						return
					}
					for _, rt := range resp.Topics {
						for _, rp := range rt.Partitions {
							if rp.ErrorCode == 0 {
								acked = append(acked, rp.Partition)
							}
						}
					}
				})
				cancel()
				g.mu.Lock()
				for _, p := range acked {
					if off > g.acked[p] {
						g.acked[p] = off
					}
				}
				g.mu.Unlock()
			}
		}()
	}
	return g
}

// acks returns the sum of the highest acknowledged offsets: it grows while
// commits are being acknowledged.
func (g *kgoGroup) acks() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var n int64
	for _, o := range g.acked {
		n += o
	}
	return n
}

// waitMoreAcks waits (bounded) until commits are acknowledged beyond from.
func (g *kgoGroup) waitMoreAcks(t *testing.T, from int64, within time.Duration) {
	t.Helper()
	if !testwait.Until(within, func() bool { return g.acks() > from }) {
		t.Fatalf("no commit acknowledged within %v", within)
	}
}

// stableOn reports whether the group is Stable on its coordinator with all
// members, and the members' callbacks show every partition owned exactly
// once.
func (g *kgoGroup) stableOn(ctx context.Context, seeds []string, members int) (bool, string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DialTimeout(time.Second), kgo.RetryTimeout(3*time.Second))
	if err != nil {
		return false, err.Error()
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{g.group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, err.Error()
	}
	d := resp.Groups[0]
	if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != members {
		return false, fmt.Sprintf("code %d state %s members %d", d.ErrorCode, d.State, len(d.Members))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := map[int32]int{}
	for _, ps := range g.owned {
		for p := range ps {
			seen[p]++
		}
	}
	for p := int32(0); p < g.nParts; p++ {
		if seen[p] != 1 {
			return false, fmt.Sprintf("partition %d owned by %d members", p, seen[p])
		}
	}
	return true, ""
}

func (g *kgoGroup) waitStable(t *testing.T, seeds []string, members int, within time.Duration) time.Duration {
	t.Helper()
	return pollStable(t, "kgo group "+g.group, within, func(ctx context.Context) (bool, string) { return g.stableOn(ctx, seeds, members) })
}

// verify stops committing and checks every acknowledged offset is stored.
func (g *kgoGroup) verify(t *testing.T, cl *kgo.Client) {
	t.Helper()
	close(g.stop)
	g.done.Wait()
	resp := testkafka.FetchOffsets(t, cl, g.group, g.topic, g.nParts, 20*time.Second)
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []int32
	for p := range g.acked {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, rp := range resp.Topics[0].Partitions {
		if want, ok := g.acked[rp.Partition]; ok && rp.Offset < want {
			t.Errorf("partition %d: stored %d, acknowledged %d", rp.Partition, rp.Offset, want)
		}
	}
	if len(ps) == 0 {
		t.Fatal("no commit was acknowledged: the group never worked")
	}
}

// TestFailoverKgoConsumerGroup: franz-go's own consumer group (kgo group
// management, range balancer, commits through kgo) on three cohort nodes; the
// node coordinating the group stops. kgo finds the new coordinator, the group
// re-forms from stored state, and no acknowledged commit is lost.
func TestFailoverKgoConsumerGroup(t *testing.T) {
	ec := etcdtest.Start(t, 3)
	ns := []*node.Node{startNode(t, ec, 1, testLeaseTTL), startNode(t, ec, 2, testLeaseTTL), startNode(t, ec, 3, testLeaseTTL)}
	waitSettled(t, 30*time.Second, ns...)
	if _, err := ns[1].Catalog().Create("events", 6, nil); err != nil {
		t.Fatal(err)
	}
	group := groupsOn(ns[1], 1, "kgo-g", 1)[0] // coordinated by node 1, the victim
	seeds := addrs(ns[1:]...)
	kg := startKgoGroup(t, addrs(ns...), group, "events", 6, 3)
	kg.waitStable(t, seeds, 3, 60*time.Second)
	kg.waitMoreAcks(t, 0, 30*time.Second)

	start := time.Now()
	if err := ns[0].Close(); err != nil {
		t.Fatal(err)
	}
	waitSettledWithout(t, 30*time.Second, 1, ns[1:]...)
	kg.waitStable(t, seeds, 3, 60*time.Second)
	// Commits carrying the members' generation are acknowledged by the new
	// coordinator: the members found it and kept their membership.
	kg.waitMoreAcks(t, kg.acks(), 30*time.Second)
	t.Logf("kgo consumer group stable and committing again %v after its coordinator stopped", time.Since(start))
	kg.verify(t, newClient(t, seeds...))
}

// TestFailoverKgoConsumerGroupKill: as above, but the coordinating node is a
// child process killed with SIGKILL (nothing of its cleanup runs): the
// partition moves when its lease expires (the test revokes it right after
// the kill, as etcd does when the TTL runs out), and kgo's group carries
// on.
func TestFailoverKgoConsumerGroupKill(t *testing.T) {
	ec := etcdtest.Start(t, 3)
	ns := []*node.Node{startNode(t, ec, 2, testLeaseTTL), startNode(t, ec, 3, testLeaseTTL)}
	ch := startChild(t, ec, 1, testLeaseTTL)
	waitSettled(t, 30*time.Second, ns...)
	if _, err := ns[0].Catalog().Create("events", 6, nil); err != nil {
		t.Fatal(err)
	}
	group := groupsOn(ns[0], 1, "kgo-k", 1)[0] // coordinated by the child
	seeds := addrs(ns...)
	kg := startKgoGroup(t, append(addrs(ns...), ch.addr), group, "events", 6, 3)
	kg.waitStable(t, seeds, 3, 60*time.Second)
	kg.waitMoreAcks(t, 0, 30*time.Second)

	start := time.Now()
	ch.Kill() // SIGKILL, then waited for
	expireLease(t, ec, 1)
	waitSettledWithout(t, 30*time.Second, 1, ns...)
	kg.waitStable(t, seeds, 3, 60*time.Second)
	kg.waitMoreAcks(t, kg.acks(), 30*time.Second)
	t.Logf("kgo consumer group stable and committing again %v after SIGKILL of its coordinator and the end of its lease", time.Since(start))
	kg.verify(t, newClient(t, seeds...))
}

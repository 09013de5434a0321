package node

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testwait"
)

// Helpers of the KIP-848 durability and cluster tests
// (kip848_durable_test.go, kip848_cluster_test.go): a set of franz-go
// consumers on the consumer group protocol whose callbacks are recorded, and
// a normalized ConsumerGroupDescribe to compare a group before and after its
// coordinator went away.

// group848 is a set of franz-go consumers (kgo.ServerSideBalancer) in one
// consumer-protocol group subscribed to one topic.
type group848 struct {
	t     *testing.T
	ctx   context.Context
	group string
	topic string
	o     *owners // current ownership; fails on a partition owned twice

	mu       sync.Mutex
	watch    bool     // record takeaways from here on
	takeaway []string // partitions revoked or lost while watching
	cls      map[string]*kgo.Client
	hbReads  map[string]*atomic.Int64 // ConsumerGroupHeartbeat answers read, per consumer
}

// start848 starts one consumer per name, closed when the test ends. The
// consumers poll until ctx ends; autocommit is off so that only the tests'
// commits are stored.
func start848(t *testing.T, ctx context.Context, seeds []string, group, topic string, names ...string) *group848 {
	t.Helper()
	g := &group848{t: t, ctx: ctx, group: group, topic: topic, o: &owners{t: t, own: map[int32]string{}},
		cls: map[string]*kgo.Client{}, hbReads: map[string]*atomic.Int64{}}
	for _, name := range names {
		name := name
		reads := &atomic.Int64{}
		g.hbReads[name] = reads
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(seeds...), kgo.ClientID(name),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.DisableAutoCommit(), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.DialTimeout(time.Second), kgo.RetryTimeout(30*time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.o.assigned(name, m[topic]) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.taken(name, "revoked", m[topic]) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.taken(name, "lost", m[topic]) }),
			kgo.WithHooks(hbReadHook{reads}),
		)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		g.cls[name] = cl
		go func() {
			for ctx.Err() == nil {
				if f := cl.PollFetches(ctx); f.IsClientClosed() {
					return
				}
			}
		}()
	}
	return g
}

func (g *group848) taken(name, how string, ps []int32) {
	g.o.revoked(name, ps)
	if len(ps) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.watch {
		g.takeaway = append(g.takeaway, fmt.Sprintf("%s %s %v", name, how, ps))
	}
}

// watchTakeaways starts recording every partition revoked from or lost by a
// consumer.
func (g *group848) watchTakeaways() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watch, g.takeaway = true, nil
}

func (g *group848) takeaways() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.takeaway)
}

// ownership is who owns what, from the callbacks: "a:[0 1] b:[2 3]".
func (g *group848) ownership() string {
	g.o.mu.Lock()
	defer g.o.mu.Unlock()
	by := map[string][]int32{}
	for p, w := range g.o.own {
		by[w] = append(by[w], p)
	}
	var out []string
	for w, ps := range by {
		slices.Sort(ps)
		out = append(out, fmt.Sprintf("%s:%v", w, ps))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// checkExclusive fails the test if a partition was ever given to a consumer
// while another one owned it.
func (g *group848) checkExclusive() {
	g.t.Helper()
	g.o.mu.Lock()
	defer g.o.mu.Unlock()
	if g.o.bad != "" {
		g.t.Fatal(g.o.bad)
	}
}

// waitBalanced waits (bounded by within) until every partition of the
// topic is owned and each consumer owns parts/len(consumers) of them.
func (g *group848) waitBalanced(parts int, within time.Duration) {
	g.t.Helper()
	want := map[string]int{}
	for name := range g.cls {
		want[name] = parts / len(g.cls)
	}
	var got map[string]int
	balanced := func() bool { return fmt.Sprint(got) == fmt.Sprint(want) }
	testwait.Until(within, func() bool {
		g.checkExclusive()
		got = g.o.count()
		return balanced() || g.ctx.Err() != nil
	})
	if !balanced() {
		g.t.Fatalf("ownership %v after %v, want %v", got, within, want)
	}
}

// heartbeats is how many ConsumerGroupHeartbeat answers each consumer has
// read so far.
func (g *group848) heartbeats() map[string]int64 {
	out := map[string]int64{}
	for name, r := range g.hbReads {
		out[name] = r.Load()
	}
	return out
}

// waitHeartbeats waits until every consumer has read n more heartbeat
// answers than in from.
func (g *group848) waitHeartbeats(from map[string]int64, n int64, within time.Duration) {
	g.t.Helper()
	var now map[string]int64
	if !testwait.Until(within, func() bool {
		now = g.heartbeats()
		for name, c := range now {
			if c < from[name]+n {
				return false
			}
		}
		return true
	}) {
		g.t.Fatalf("heartbeat answers read %v, want %d more than %v within %v", now, n, from, within)
	}
}

// commit has every consumer commit base+partition for the partitions it
// owns, through its own group client (so with its member id and epoch), and
// fails on any error: a fenced or unknown member cannot commit.
func (g *group848) commit(base int64) map[int32]int64 {
	g.t.Helper()
	want := map[int32]int64{}
	for name, cl := range g.cls {
		offs := map[string]map[int32]kgo.EpochOffset{g.topic: {}}
		g.o.mu.Lock()
		for p, w := range g.o.own {
			if w == name {
				offs[g.topic][p] = kgo.EpochOffset{Epoch: -1, Offset: base + int64(p)}
				want[p] = base + int64(p)
			}
		}
		g.o.mu.Unlock()
		ctx, cancel := context.WithTimeout(g.ctx, 10*time.Second)
		var cerr error
		cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 && cerr == nil {
						cerr = fmt.Errorf("partition %d: error code %d", p.Partition, p.ErrorCode)
					}
				}
			}
		})
		cancel()
		if cerr != nil {
			g.t.Fatalf("commit by %s: %v", name, cerr)
		}
	}
	return want
}

// checkOffsets fetches the group's committed offsets (as an admin, with no
// member, through a new client of seeds each time: a client's cached
// coordinator may name a node that is gone) and compares them with want.
func (g *group848) checkOffsets(seeds []string, want map[int32]int64) {
	g.t.Helper()
	var got map[int32]int64
	err := testwait.Err(10*time.Second, func() (err error) { // partitions may still be loading or moving
		got, err = fetchOffsets848(g.ctx, seeds, g.group, g.topic)
		return err
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		g.t.Fatalf("committed offsets %v (%v), want %v", got, err, want)
	}
}

func fetchOffsets848(ctx context.Context, seeds []string, group, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DialTimeout(time.Second), kgo.RetryTimeout(3*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	got := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			got[o.Partition] = o.At
		}
	})
	return got, nil
}

// memberEpochs is each consumer's member id and epoch as the client itself
// knows them.
func (g *group848) memberEpochs() map[string]string {
	out := map[string]string{}
	for name, cl := range g.cls {
		id, epoch := cl.GroupMetadata()
		out[name] = fmt.Sprintf("%s@%d", id, epoch)
	}
	return out
}

// state848 is what a settled group looked like before its coordinator went.
type state848 struct {
	desc      describe848
	owned     string            // from the consumers' callbacks
	ids       map[string]string // member id@epoch per consumer, as the clients know them
	committed map[int32]int64
}

// settle waits (bounded by within) until the consumers share the topic's
// parts partitions evenly and the group is settled, has every consumer
// commit, and from then on records partitions taken from them.
func (g *group848) settle(seeds []string, parts int, within time.Duration) state848 {
	g.t.Helper()
	g.waitBalanced(parts, within)
	n := len(g.cls)
	desc := waitDescribed(g.t, g.ctx, seeds, g.group, within, func(d describe848) bool { return d.n == n && d.settled })
	committed := g.commit(100)
	g.checkOffsets(seeds, committed)
	s := state848{desc: desc, owned: g.ownership(), ids: g.memberEpochs(), committed: committed}
	g.t.Logf("before: %v; consumers %v", s.desc, s.ids)
	g.watchTakeaways()
	return s
}

// checkUnchanged checks, once the coordinator is back or another node took
// over, that the group is what it was: as loaded (before the members
// heartbeat again) and after every consumer read two more heartbeat
// answers (the first may be a retriable error) within hbWithin; that no
// consumer had a partition revoked or lost or changed member id or epoch;
// that the committed offsets are there and the members can still commit
// with their epochs.
func (g *group848) checkUnchanged(seeds []string, b state848, hbWithin time.Duration) {
	g.t.Helper()
	loaded := waitDescribed(g.t, g.ctx, seeds, g.group, 20*time.Second, func(describe848) bool { return true })
	if loaded != b.desc {
		g.t.Errorf("group as loaded by its coordinator:\n  %v\nbefore:\n  %v", loaded, b.desc)
	}
	g.checkOffsets(seeds, b.committed)
	g.waitHeartbeats(g.heartbeats(), 2, hbWithin)
	after := waitDescribed(g.t, g.ctx, seeds, g.group, 5*time.Second, func(describe848) bool { return true })
	if after != b.desc {
		g.t.Errorf("group after the members heartbeated again:\n  %v\nbefore:\n  %v", after, b.desc)
	}
	if now := g.memberEpochs(); fmt.Sprint(now) != fmt.Sprint(b.ids) {
		g.t.Errorf("consumers' member ids and epochs %v, before %v", now, b.ids)
	}
	if lost := g.takeaways(); len(lost) > 0 {
		g.t.Errorf("partitions taken from consumers: %v", lost)
	}
	if now := g.ownership(); now != b.owned {
		g.t.Errorf("ownership %s, before %s", now, b.owned)
	}
	g.checkExclusive()
	g.checkOffsets(seeds, g.commit(200))
}

type hbReadHook struct{ n *atomic.Int64 }

func (h hbReadHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 68 && err == nil {
		h.n.Add(1)
	}
}

// describe848 is a consumer group as ConsumerGroupDescribe shows it, in a
// form that compares with ==: group and assignment epochs, and per member
// its epoch, client id, assignment and target assignment.
type describe848 struct {
	code    int16
	state   string
	epoch   int32
	assign  int32
	members string
	n       int
	settled bool // every member at the group epoch, owning its target
}

func (d describe848) String() string {
	return fmt.Sprintf("state %s epoch %d assignment epoch %d members %s", d.state, d.epoch, d.assign, d.members)
}

func assignmentString(a kmsg.Assignment) string {
	var out []string
	for _, t := range a.TopicPartitions {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		out = append(out, fmt.Sprintf("%s%v", t.Topic, ps))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// describeGroup848 asks for the group with a raw ConsumerGroupDescribe
// through a new client of seeds (which finds the group's coordinator: a
// client's cached coordinator may name a node that is gone).
func describeGroup848(ctx context.Context, seeds []string, group string) (describe848, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DialTimeout(time.Second), kgo.RetryTimeout(3*time.Second))
	if err != nil {
		return describe848{}, err
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return describe848{}, err
	}
	if len(resp.Groups) != 1 {
		return describe848{}, fmt.Errorf("%d groups in the answer", len(resp.Groups))
	}
	gr := resp.Groups[0]
	d := describe848{code: gr.ErrorCode, state: gr.State, epoch: gr.Epoch, assign: gr.AssignmentEpoch, n: len(gr.Members), settled: true}
	var ms []string
	for _, m := range gr.Members {
		cur, target := assignmentString(m.Assignment), assignmentString(m.TargetAssignment)
		ms = append(ms, fmt.Sprintf("%s(%s)@%d=%s/%s", m.MemberID, m.ClientID, m.MemberEpoch, cur, target))
		if m.MemberEpoch != gr.Epoch || cur != target {
			d.settled = false
		}
	}
	sort.Strings(ms)
	d.members = strings.Join(ms, " ")
	if gr.Epoch != gr.AssignmentEpoch || gr.State != "Stable" {
		d.settled = false
	}
	return d, nil
}

// waitDescribed polls ConsumerGroupDescribe (bounded) until the group is
// answered without error and ok accepts it.
func waitDescribed(t *testing.T, ctx context.Context, seeds []string, group string, within time.Duration, ok func(describe848) bool) describe848 {
	t.Helper()
	var last describe848
	var lastErr error
	if testwait.Until(within, func() bool {
		last, lastErr = describeGroup848(ctx, seeds, group)
		return (lastErr == nil && last.code == 0 && ok(last)) || ctx.Err() != nil
	}) && lastErr == nil && last.code == 0 && ok(last) {
		return last
	}
	t.Fatalf("ConsumerGroupDescribe %s after %v: %v (code %d, err %v)", group, within, last, last.code, lastErr)
	return describe848{}
}

package kgobalancer_test

import (
	"maps"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
	"github.com/cohort-dev/cohort/consumer/internal/churn"
	"github.com/cohort-dev/cohort/consumer/kgobalancer"
)

// The leader-path benchmark measures what a franz-go group leader pays to
// balance through the kgo.GroupBalancer interface, the way kgo's
// balanceGroup drives it: MemberBalancer over the JoinGroup response's
// members (decoding every subscription, sticky user data included),
// SetBalanceInfo, BalanceOrError over the partition counts, and
// IntoSyncAssignment (the encoded SyncGroup assignments). kgo's own logging
// of the members and the plan around those calls is left out. cohort's
// assignors (through kgobalancer) and franz-go's balancers run on the same
// group, each member's metadata written by the balancer's own
// JoinGroupMetadata as that client would send it.

// leaderScenario is one group (see churn.Build): ntopics x nparts
// partitions, nmembers members rejoining after one member of a scattered
// previous plan left; divergent makes one member subscribe to half the
// topics.
type leaderScenario struct {
	name                      string
	ntopics, nparts, nmembers int
	divergent                 bool
}

var leaderScenarios = []leaderScenario{
	{"1M-x-2000/leave", 500, 2000, 2000, false},
	{"1M-x-2000/leave+divergent", 500, 2000, 2000, true},
	{"100k-x-10000/leave", 200, 500, 10000, false},
}

// leaderGroup is a scenario's group and what kgo's metadata cache holds.
type leaderGroup struct {
	*churn.Group
	info kgo.BalanceInfo
}

const leaderGeneration = 41

func buildLeaderGroup(s leaderScenario) *leaderGroup {
	g := &leaderGroup{Group: churn.Build(s.ntopics, s.nparts, s.nmembers, s.divergent)}
	// Every partition on one of three brokers, no racks (no member
	// announces one either).
	topicsMd := map[string]kgo.TopicMetadata{}
	for _, n := range g.Names {
		td := kgo.TopicMetadata{Topic: n, Partitions: make([]kgo.PartitionMetadata, s.nparts)}
		for p := range td.Partitions {
			td.Partitions[p] = kgo.PartitionMetadata{Partition: int32(p), Leader: int32(p % 3), Replicas: []int32{int32(p % 3)}}
		}
		topicsMd[n] = td
	}
	brokers := map[int32]kgo.BrokerMetadata{0: {NodeID: 0}, 1: {NodeID: 1}, 2: {NodeID: 2}}
	g.info = kgo.BalanceInfo{
		Group:      "bench",
		Generation: leaderGeneration + 1,
		LeaderID:   g.IDs[0],
		Topics:     func() map[string]kgo.TopicMetadata { return topicsMd },
		Brokers:    func() map[int32]kgo.BrokerMetadata { return brokers },
	}
	return g
}

// leaderBalancer is one balancer compared, by the name used in the
// benchmark. remembers marks kgobalancer's eager variant: kgo gives eager
// balancers no current assignment, and it announces the one it remembered
// from its last SyncGroup (ParseSyncAssignment).
type leaderBalancer struct {
	name      string
	new       func() kgo.GroupBalancer
	remembers bool
}

var leaderBalancers = []leaderBalancer{
	{"cohort-sticky", func() kgo.GroupBalancer { return kgobalancer.New(sticky.New()) }, true},
	{"franz-sticky", kgo.StickyBalancer, false},
	{"cohort-cooperative-sticky", func() kgo.GroupBalancer { return kgobalancer.New(sticky.NewCooperative()) }, false},
	{"franz-cooperative-sticky", kgo.CooperativeStickyBalancer, false},
}

// joinMembers is the JoinGroup response a leader using bal receives: each
// member's metadata comes from its own balancer's JoinGroupMetadata, given
// what kgo passes it (its previous assignment).
func (g *leaderGroup) joinMembers(tb testing.TB, bal leaderBalancer) []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.IDs))
	for _, id := range g.IDs {
		b := bal.new()
		cur := g.Prev[id]
		if bal.remembers {
			a := consumer.Assignment{Version: consumer.MaxVersion}
			for _, t := range slices.Sorted(maps.Keys(cur)) {
				a.Partitions = append(a.Partitions, assign.TopicPartitions{Topic: t, Partitions: cur[t]})
			}
			raw, err := a.Encode()
			if err != nil {
				tb.Fatal(err)
			}
			if _, err := b.ParseSyncAssignment(raw); err != nil {
				tb.Fatal(err)
			}
			cur = nil
		}
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		m.ProtocolMetadata = b.JoinGroupMetadata(g.Subs[id], cur, leaderGeneration)
		out = append(out, m)
	}
	return out
}

// leaderBalance is the timed leader path.
func leaderBalance(b kgo.GroupBalancer, members []kmsg.JoinGroupResponseMember, counts map[string]int32, info kgo.BalanceInfo) ([]kmsg.SyncGroupRequestGroupAssignment, error) {
	mb, _, err := b.MemberBalancer(members)
	if err != nil {
		return nil, err
	}
	if ib, ok := mb.(kgo.GroupMemberBalancerInfo); ok {
		ib.SetBalanceInfo(info)
	}
	var into kgo.IntoSyncAssignment
	if eb, ok := mb.(kgo.GroupMemberBalancerOrError); ok {
		if into, err = eb.BalanceOrError(counts); err != nil {
			return nil, err
		}
	} else {
		into = mb.Balance(counts)
	}
	return into.IntoSyncAssignment(), nil
}

// quality decodes the SyncGroup assignments and rates the plan (see
// churn.Group.Quality).
func (g *leaderGroup) quality(tb testing.TB, out []kmsg.SyncGroupRequestGroupAssignment) (spread, moved, unassigned int) {
	plan := map[string]map[string][]int32{}
	for _, sa := range out {
		a, err := consumer.DecodeAssignment(sa.MemberAssignment)
		if err != nil {
			tb.Fatal(err)
		}
		m := map[string][]int32{}
		for _, tp := range a.Partitions {
			m[tp.Topic] = append(m[tp.Topic], tp.Partitions...)
		}
		plan[sa.MemberID] = m
	}
	return g.Quality(plan)
}

// The inputs are large: one group and one balancer's members are kept at
// a time.
var (
	leaderMu      sync.Mutex
	leaderKey     string
	leaderG       *leaderGroup
	leaderMemKey  string
	leaderMembers []kmsg.JoinGroupResponseMember
)

func leaderInputs(tb testing.TB, s leaderScenario, bal leaderBalancer) (*leaderGroup, []kmsg.JoinGroupResponseMember) {
	leaderMu.Lock()
	defer leaderMu.Unlock()
	if leaderKey != s.name {
		leaderG, leaderMembers, leaderMemKey = nil, nil, ""
		runtime.GC()
		leaderKey, leaderG = s.name, buildLeaderGroup(s)
	}
	if key := s.name + "/" + bal.name; leaderMemKey != key {
		leaderMembers = nil
		runtime.GC()
		leaderMemKey, leaderMembers = key, leaderG.joinMembers(tb, bal)
		// Building the inputs leaves hundreds of MB of garbage; give it
		// back to the OS now rather than have the runtime's background
		// scavenger do it during the next measurement (which made the
		// first balancer measured after a group was built up to 4x
		// slower than the same path measured later).
		debug.FreeOSMemory()
	}
	return leaderG, leaderMembers
}

// BenchmarkLeaderPath: see the comment at the top of the file. Run with
// -benchtime=2x (franz-go takes up to seconds per operation at 1M
// partitions); the 1M inputs need about 1 GB. Metrics: spread, moved
// (cooperative variants withhold moving partitions for the follow-up
// rebalance, counted here), unassigned (partitions withheld in total).
func BenchmarkLeaderPath(b *testing.B) {
	if testing.Short() {
		b.Skip("large benchmark skipped in -short mode")
	}
	for _, s := range leaderScenarios {
		b.Run(s.name, func(b *testing.B) {
			for _, bal := range leaderBalancers {
				b.Run(bal.name, func(b *testing.B) {
					g, members := leaderInputs(b, s, bal)
					balancer := bal.new()
					// One untimed run first: the process's heap grows
					// to the size the path needs, as in a long-lived
					// leader, instead of the first measured balancer
					// paying for it.
					out, err := leaderBalance(balancer, members, g.Counts, g.info)
					if err != nil {
						b.Fatal(err)
					}
					runtime.GC()
					b.ReportAllocs()
					cpu0 := processCPU(b)
					b.ResetTimer()
					for b.Loop() {
						if out, err = leaderBalance(balancer, members, g.Counts, g.info); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					// The process's CPU time per operation, every thread
					// (the collector's included): cohort's assignors
					// encode large plans on several goroutines, so the
					// time per operation is not the CPU it costs.
					b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
					spread, moved, unassigned := g.quality(b, out)
					b.ReportMetric(float64(spread), "spread")
					b.ReportMetric(float64(moved), "moved")
					b.ReportMetric(float64(unassigned), "unassigned")
				})
			}
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestLeaderPathInputs runs the benchmark's path on a small group for every
// balancer and checks cohort's plans: balanced, every previously owned
// partition of the remaining members kept, and (one divergent member
// aside) everything assigned.
func TestLeaderPathInputs(t *testing.T) {
	for _, s := range []leaderScenario{{"small", 6, 10, 8, false}, {"small+divergent", 6, 10, 8, true}} {
		g := buildLeaderGroup(s)
		for _, bal := range leaderBalancers {
			out, err := leaderBalance(bal.new(), g.joinMembers(t, bal), g.Counts, g.info)
			if err != nil {
				t.Fatalf("%s %s: %v", s.name, bal.name, err)
			}
			spread, moved, unassigned := g.quality(t, out)
			t.Logf("%s %s: spread %d moved %d unassigned %d", s.name, bal.name, spread, moved, unassigned)
			if bal.name == "cohort-sticky" && !s.divergent && (spread > 1 || moved != 0 || unassigned != 0) {
				t.Errorf("%s %s: spread %d moved %d unassigned %d, want <=1, 0, 0", s.name, bal.name, spread, moved, unassigned)
			}
		}
	}
}

// TestLeaderPathLargePlanParallel checks a plan large enough to be cut and
// encoded on several goroutines (200k partitions) against the assignor's
// own Assign: every member's SyncGroup bytes decode to exactly its
// assignment.
func TestLeaderPathLargePlanParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("large plan")
	}
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	g := buildLeaderGroup(leaderScenario{"200k-x-300", 100, 2000, 300, true})
	for _, bal := range leaderBalancers {
		if bal.name != "cohort-sticky" && bal.name != "cohort-cooperative-sticky" {
			continue
		}
		members := g.joinMembers(t, bal)
		out, err := leaderBalance(bal.new(), members, g.Counts, g.info)
		if err != nil {
			t.Fatal(err)
		}
		// The same members through Assign.
		d := consumer.NewMemberDecoder()
		var ms []assign.Member
		for _, jm := range members {
			m, _, err := d.Member(jm.ProtocolMetadata, jm.MemberID, "")
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		slices.SortFunc(ms, func(a, b assign.Member) int { return strings.Compare(a.ID, b.ID) })
		topics := map[string]assign.Topic{}
		for n, c := range g.Counts {
			topics[n] = assign.Topic{Name: n, Partitions: c}
		}
		a := sticky.New()
		if bal.name == "cohort-cooperative-sticky" {
			a = sticky.NewCooperative()
		}
		want, err := a.Assign(ms, topics)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != len(ms) {
			t.Fatalf("%s: %d assignments for %d members", bal.name, len(out), len(ms))
		}
		for _, sa := range out {
			got, err := consumer.DecodeAssignment(sa.MemberAssignment)
			if err != nil {
				t.Fatal(err)
			}
			w := want[sa.MemberID].Partitions
			if len(got.Partitions) != len(w) {
				t.Fatalf("%s %s: %d topics, want %d", bal.name, sa.MemberID, len(got.Partitions), len(w))
			}
			for i := range w {
				if got.Partitions[i].Topic != w[i].Topic || !slices.Equal(got.Partitions[i].Partitions, w[i].Partitions) {
					t.Fatalf("%s %s: topic %d is %v, want %v", bal.name, sa.MemberID, i, got.Partitions[i], w[i])
				}
			}
		}
	}
}

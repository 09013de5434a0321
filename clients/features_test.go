package clients

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/clients/testbed"
)

// goClients are the clients of the feature tests (static membership,
// cooperative rebalancing, restart).
var goClients = []struct {
	name  string
	start Starter
}{
	{"kgo", func(t *testing.T, b *testbed.Bed, c MemberConfig) Member { return startKgo(t, b, c) }},
	{"sarama", startSarama},
	{"librdkafka", startRdkafka},
}

// memberOf returns the member id in assignments whose id cohort minted from
// clientID ("<client id>-<uuid>"), or "".
func memberOf(assign map[string][]testbed.TP, clientID string) string {
	for m := range assign {
		if strings.HasPrefix(m, clientID+"-") {
			return m
		}
	}
	return ""
}

func waitProgress(ctx context.Context, t *testing.T, seen *testbed.Seen, n int) {
	t.Helper()
	if err := testbed.WaitFor(ctx, fmt.Sprintf("%d records processed", n), func() bool { return seen.Distinct() >= n }); err != nil {
		t.Fatalf("%v (processed %d)", err, seen.Distinct())
	}
}

// TestMixedGroup (2): franz-go, sarama and librdkafka members in one group,
// on range and on cooperative-sticky: they agree on a protocol, converge, and
// consume everything; then one leaves and the others take over its share.
func TestMixedGroup(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own bed or node
	for _, protocol := range []string{"range", "cooperative-sticky"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel() // its own bed
			const topic, P, K = "mixed", 6, 1500
			b := testbed.Start(t, testbed.Options{Topics: map[string]int32{topic: P}})
			grp := "mixed-" + protocol
			b.Produce(t, topic, P, 0, K)
			seen := testbed.NewSeen()
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			var members []Member
			defer func() {
				for _, m := range members {
					m.Close()
				}
			}()
			for i, c := range goClients {
				members = append(members, c.start(t, b, MemberConfig{Group: grp, Topic: topic,
					ClientID: fmt.Sprintf("%s-%d", c.name, i), Protocol: protocol, Seen: seen}))
			}
			gen := waitMembers(ctx, t, b, grp, 0, 3)
			for _, jn := range b.Router.Journal.Joins(grp) {
				if jn.Gen == gen && jn.Protocol != protocol {
					t.Errorf("generation %d chose protocol %q, want %q", gen, jn.Protocol, protocol)
				}
			}
			waitProgress(ctx, t, seen, K/3)
			members[1].Close() // sarama leaves
			waitMembers(ctx, t, b, grp, gen, 2)
			b.Produce(t, topic, P, K, K/2)
			waitProgress(ctx, t, seen, K+K/2)
			if err := b.WaitCommitted(ctx, grp, b.EndOffsets(t, topic)); err != nil {
				t.Fatal(err)
			}
			b.Check(t, grp, topic, K+K/2, seen)
		})
	}
}

// TestStaticMembership (3): a static member that crashes and comes back with
// the same group.instance.id before its session expires gets its partitions
// back in the same generation; nobody else rejoins.
func TestStaticMembership(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own bed or node
	for _, c := range goClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // its own bed
			const topic, P, K = "static", 6, 1200
			b := testbed.Start(t, testbed.Options{Topics: map[string]int32{topic: P}})
			grp := "static-" + c.name
			b.Produce(t, topic, P, 0, K)
			seen := testbed.NewSeen()
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			k := &killer{b: b}
			defer k.finish(t)
			members := map[int]Member{}
			defer func() {
				for _, m := range members {
					m.Close()
				}
			}()
			cfg := func(i int, clientID string) MemberConfig {
				return MemberConfig{Group: grp, Topic: topic, ClientID: clientID, Instance: fmt.Sprintf("instance-%d", i),
					Protocol: "range", Seen: seen, Session: 15 * time.Second}
			}
			for i := 1; i <= 3; i++ {
				members[i] = c.start(t, b, cfg(i, fmt.Sprintf("s%d", i)))
			}
			gen := waitMembers(ctx, t, b, grp, 0, 3)
			before := b.Router.Journal.Assignment(grp, gen)
			// Static members' ids are minted from the instance id.
			oldID := memberOf(before, "instance-2")
			if oldID == "" {
				t.Fatalf("no member of instance-2 in generation %d: %v", gen, before)
			}
			waitProgress(ctx, t, seen, K/4)
			k.kill(members[2], "s2")
			delete(members, 2)
			members[2] = c.start(t, b, cfg(2, "s2-restarted"))
			var newID string
			err := testbed.WaitFor(ctx, "the restarted static member's assignment", func() bool {
				for _, g := range b.Router.Journal.Generations(grp) {
					if id := memberOf(b.Router.Journal.Assignment(grp, g), "instance-2"); id != "" && id != oldID {
						newID = id
						return true
					}
				}
				return false
			})
			if err != nil {
				b.Dump(t, grp)
				t.Fatal(err)
			}
			after := b.Router.Journal.Assignment(grp, b.Router.Journal.LastGeneration(grp))
			if last := b.Router.Journal.LastGeneration(grp); last != gen {
				b.Dump(t, grp)
				t.Fatalf("generation moved from %d to %d when the static member came back", gen, last)
			}
			if !slices.Equal(after[newID], before[oldID]) {
				t.Errorf("restarted member got %v, had %v", after[newID], before[oldID])
			}
			for _, jn := range b.Router.Journal.Joins(grp) {
				if jn.Gen > gen {
					t.Errorf("a member rejoined into generation %d: %+v", jn.Gen, jn)
				}
			}
			waitProgress(ctx, t, seen, K)
			if err := b.WaitCommitted(ctx, grp, b.EndOffsets(t, topic)); err != nil {
				t.Fatal(err)
			}
			if last := b.Router.Journal.LastGeneration(grp); last != gen {
				t.Errorf("generation moved from %d to %d", gen, last)
			}
			b.Check(t, grp, topic, K, seen)
		})
	}
}

// processLog records when each client processed a record of each partition.
type processLog struct {
	mu  sync.Mutex
	rec map[string][]procRec
}

type procRec struct {
	part int32
	at   time.Time
}

func (l *processLog) hook(clientID string) func(int32) {
	return func(p int32) {
		l.mu.Lock()
		l.rec[clientID] = append(l.rec[clientID], procRec{p, time.Now()})
		l.mu.Unlock()
	}
}

// processedIn counts clientID's records of the given partitions processed in
// [from, to].
func (l *processLog) processedIn(clientID string, parts []int32, from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.rec[clientID] {
		if slices.Contains(parts, r.part) && !r.at.Before(from) && !r.at.After(to) {
			n++
		}
	}
	return n
}

// processedBefore counts, per partition, the records of parts processed by
// any client before t.
func (l *processLog) processedBefore(parts []int32, t time.Time) map[int32]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[int32]int{}
	for _, recs := range l.rec {
		for _, r := range recs {
			if slices.Contains(parts, r.part) && r.at.Before(t) {
				n[r.part]++
			}
		}
	}
	return n
}

func parts(tps []testbed.TP) []int32 {
	var out []int32
	for _, tp := range tps {
		out = append(out, tp.Partition)
	}
	return out
}

// TestCooperativeAddMember (4): with cooperative-sticky, a member joining a
// group of two takes partitions from them; the only partitions that move are
// those it ends up with, the others stay with their owners in every
// generation, and the owners keep processing them while the group
// rebalances.
func TestCooperativeAddMember(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own bed or node
	for _, c := range goClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // its own bed
			const topic, P, K = "coop", 6, 3000
			b := testbed.Start(t, testbed.Options{Topics: map[string]int32{topic: P}})
			grp := "coop-" + c.name
			b.Produce(t, topic, P, 0, K)
			seen := testbed.NewSeen()
			plog := &processLog{rec: map[string][]procRec{}}
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			members := map[string]Member{}
			defer func() {
				for _, m := range members {
					m.Close()
				}
			}()
			add := func(id string) {
				members[id] = c.start(t, b, MemberConfig{Group: grp, Topic: topic, ClientID: id,
					Protocol: "cooperative-sticky", Seen: seen, OnRecord: plog.hook(id)})
			}
			add("c1")
			add("c2")
			gen := waitMembers(ctx, t, b, grp, 0, 2)
			// The two-member generation in which both hold partitions.
			var before map[string][]testbed.TP
			err := testbed.WaitFor(ctx, "two members holding all partitions", func() bool {
				g := b.Router.Journal.LastGeneration(grp)
				a := b.Router.Journal.Assignment(grp, g)
				n := 0
				for _, tps := range a {
					if len(tps) == 0 {
						return false
					}
					n += len(tps)
				}
				if len(a) == 2 && n == P {
					gen, before = g, a
					return true
				}
				return false
			})
			if err != nil {
				b.Dump(t, grp)
				t.Fatal(err)
			}
			waitProgress(ctx, t, seen, K/6)
			add("c3")
			var final int32
			// Cooperative rebalancing takes two rounds (revoke, then assign),
			// so wait for the generation in which all three members synced
			// and hold P/3 partitions each, not just the first one in which
			// the new member holds something.
			err = testbed.WaitFor(ctx, "the new member holding its share", func() bool {
				g := b.Router.Journal.LastGeneration(grp)
				a := b.Router.Journal.Assignment(grp, g)
				if id := memberOf(a, "c3"); id == "" || len(a) != 3 {
					return false
				}
				for _, tps := range a {
					if len(tps) != P/3 {
						return false
					}
				}
				final = g
				return true
			})
			if err != nil {
				b.Dump(t, grp)
				t.Fatal(err)
			}
			after := b.Router.Journal.Assignment(grp, final)
			newID := memberOf(after, "c3")
			var moved []testbed.TP
			for _, old := range []string{"c1", "c2"} {
				id := memberOf(before, old)
				if memberOf(after, old) != id {
					t.Fatalf("%s changed member id (%s → %s)", old, id, memberOf(after, old))
				}
				kept := after[id]
				for _, tp := range kept {
					if !slices.Contains(before[id], tp) {
						t.Errorf("%s gained %s when c3 joined", old, tp)
					}
				}
				for _, tp := range before[id] {
					if !slices.Contains(kept, tp) {
						moved = append(moved, tp)
					}
				}
				// Kept partitions are in the member's assignment in
				// every generation of the rebalance in which it synced (a
				// member may miss a generation's SyncGroup when the next
				// rebalance starts first — KIP-429's back-to-back rounds).
				for g := gen + 1; g <= final; g++ {
					a := b.Router.Journal.Assignment(grp, g)
					if _, synced := a[id]; !synced {
						continue
					}
					for _, tp := range kept {
						if !slices.Contains(a[id], tp) {
							t.Errorf("%s lost %s in generation %d", old, tp, g)
						}
					}
				}
				// ... and processed them during it.
				var from time.Time
				for _, jn := range b.Router.Journal.Joins(grp) {
					if jn.Member == newID {
						from = jn.Requested
						break
					}
				}
				to := b.Router.Journal.SyncedAt(grp, final, newID)
				// Only partitions with records left when c3 joined can show
				// that their owner kept consuming (a member alone at the
				// start may already have consumed some partitions whole).
				var pending []int32
				done := plog.processedBefore(parts(kept), from)
				for _, p := range parts(kept) {
					if done[p] < K/P {
						pending = append(pending, p)
					}
				}
				if len(pending) == 0 {
					t.Logf("%s: its kept partitions %v were consumed before c3 joined (%v); nothing to observe", old, parts(kept), done)
				} else if n := plog.processedIn(old, pending, from, to); n == 0 {
					t.Errorf("%s processed nothing of its kept partitions %v (records left: %v processed of %d each) between c3's join (%s) and its assignment (%s)",
						old, pending, done, K/P, from.Format("15:04:05.000"), to.Format("15:04:05.000"))
				} else {
					t.Logf("%s processed %d records of %v during the rebalance (%v)", old, n, pending, to.Sub(from))
				}
			}
			slices.SortFunc(moved, func(x, y testbed.TP) int { return int(x.Partition - y.Partition) })
			if !slices.Equal(moved, after[newID]) {
				t.Errorf("moved %v, but the new member holds %v", moved, after[newID])
			}
			waitProgress(ctx, t, seen, K)
			if err := b.WaitCommitted(ctx, grp, b.EndOffsets(t, topic)); err != nil {
				t.Fatal(err)
			}
			b.Check(t, grp, topic, K, seen)
		})
	}
}

// restartClients are the clients of TestCohortRestart: the Go ones and
// the child processes (kafkajs, kcat, kafka-python), which commit while
// they consume (kcat and kafka-python automatically, kafkajs per batch).
var restartClients = append(slices.Clone(goClients), []struct {
	name  string
	start Starter
}{
	{"kafkajs", startKafkajs},
	{"kcat", startKcat},
	{"kafkapython", startKafkaPython},
}...)

// TestCohortRestart (6): cohort runs as a child process on its disk store;
// it is SIGKILLed in the middle of consumption and restarted on the same
// address and directory. The members reconnect, the group re-forms, every
// commit acknowledged before the kill is still there, and consumption
// completes.
func TestCohortRestart(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own bed or node
	if testing.Short() {
		t.Skip("builds cohort and kills a child process")
	}
	for _, c := range restartClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // its own bed, cohort process and data directory
			const topic, P, K = "restart", 6, 3000
			co := testbed.StartCohort(t, t.TempDir())
			b := testbed.Start(t, testbed.Options{Topics: map[string]int32{topic: P}, CohortAddr: co.Addr})
			grp := "restart-" + c.name
			b.Produce(t, topic, P, 0, K/2)
			seen := testbed.NewSeen()
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
			defer cancel()
			var members []Member
			defer func() {
				for _, m := range members {
					m.Close()
				}
			}()
			for i := 1; i <= 2; i++ {
				members = append(members, c.start(t, b, MemberConfig{Group: grp, Topic: topic,
					ClientID: fmt.Sprintf("r%d", i), Protocol: "range", Seen: seen}))
			}
			gen := waitMembers(ctx, t, b, grp, 0, 2)
			waitProgress(ctx, t, seen, K/6)
			if err := testbed.WaitFor(ctx, "some commits", func() bool { return len(b.Router.Journal.Commits(grp)) > 0 }); err != nil {
				t.Fatal(err)
			}
			co.Kill()
			acked := b.Router.Journal.LastCommits(grp) // nothing is acknowledged after the kill
			t.Logf("killed cohort after %d acknowledged commits (generation %d): %v", len(b.Router.Journal.Commits(grp)), gen, acked)
			b.Produce(t, topic, P, K/2, K/2) // the data plane is not affected
			co.Start(t)
			var got map[testbed.TP]int64
			err := testbed.WaitFor(ctx, "offsets from the restarted cohort", func() bool {
				var err error
				got, err = b.Committed(ctx, grp)
				return err == nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for tp, off := range acked {
				if got[tp] < off {
					t.Errorf("%s: acknowledged commit %d lost, cohort has %d after the restart", tp, off, got[tp])
				}
			}
			waitProgress(ctx, t, seen, K)
			if err := b.WaitCommitted(ctx, grp, b.EndOffsets(t, topic)); err != nil {
				t.Fatal(err)
			}
			// The group is still (or again) two members with assignments.
			if last := b.Router.Journal.LastGeneration(grp); len(b.Router.Journal.Assignment(grp, last)) != 2 {
				t.Errorf("after the restart, generation %d has members %v", last, b.Router.Journal.Assignment(grp, last))
			}
			b.Check(t, grp, topic, K, seen)
		})
	}
}

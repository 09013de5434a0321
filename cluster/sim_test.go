package cluster

// Deterministic many-node scenarios: every node is a Cluster on one
// MemLeases, driven step by step by the test (no goroutines, no sleeps, no
// wall clock); time is a fake clock that only the test advances. After every
// action the invariant is checked (sim.check).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/server"
)

const simParts = 50

var simStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// simCoord stands for the coordinator: the partitions it was told to serve.
type simCoord struct{ held map[int32]bool }

func (s *simCoord) Acquire(p int32) { s.held[p] = true }
func (s *simCoord) Release(p int32) { delete(s.held, p) }

// simFence stands for the fenced store: the create revision its writes to
// each partition would compare.
type simFence struct{ revs map[int32]int64 }

func (f *simFence) SetOwner(p int32, rev int64) { f.revs[p] = rev }
func (f *simFence) ClearOwner(p int32)          { delete(f.revs, p) }

// driftClock is a node clock running at rate times the true (fake) clock.
type driftClock struct {
	f    *clock.Fake
	rate float64
}

func (d driftClock) Now() time.Time {
	return simStart.Add(time.Duration(float64(d.f.Now().Sub(simStart)) * d.rate))
}
func (d driftClock) NewTimer(x time.Duration) clock.Timer { return d.f.NewTimer(x) }

type simNode struct {
	id        int32
	c         *Cluster
	cl        *MemClient
	coord     *simCoord
	fence     *simFence
	inSession bool
	nextRenew time.Time // by the node's clock
	crashed   bool      // process gone: never stepped again (restart makes a new one)
	paused    bool      // process frozen: not stepped until resumed
	left      bool      // left gracefully
}

type sim struct {
	t      testing.TB
	clk    *clock.Fake
	mem    *MemLeases
	ttl    time.Duration
	margin time.Duration
	nodes  []*simNode
	ctx    context.Context
	// violation, if set, receives invariant violations instead of failing
	// the test (tests that show the check finds a broken variant).
	violation func(string)
	actions   int
	trace     []string
}

func newSim(t testing.TB, ttl time.Duration) *sim {
	clk := clock.NewFake(simStart)
	return &sim{t: t, clk: clk, mem: NewMemLeases(clk), ttl: ttl, ctx: context.Background()}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// add starts node id's process (a new Cluster); rate != 1 gives it a
// drifting clock.
func (s *sim) add(id int32, rate float64) *simNode {
	var clk clock.Clock = s.clk
	if rate != 1 {
		clk = driftClock{s.clk, rate}
	}
	n := &simNode{id: id, cl: s.mem.Client(), coord: &simCoord{held: map[int32]bool{}}, fence: &simFence{revs: map[int32]int64{}}}
	c, err := New(Config{Leases: n.cl, Fence: n.fence, NodeID: id, Partitions: simParts, LeaseTTL: s.ttl,
		SafetyMargin: s.margin, Clock: clk, Logger: discard})
	if err != nil {
		s.t.Fatal(err)
	}
	c.coord = n.coord
	c.SetSelf(server.Broker{Host: "n" + strconv.Itoa(int(id)), Port: 9000 + id}) // an address clients could use
	n.c = c
	for i, o := range s.nodes {
		if o.id == id {
			s.nodes[i] = n
			return n
		}
	}
	s.nodes = append(s.nodes, n)
	slices.SortFunc(s.nodes, func(a, b *simNode) int { return int(a.id - b.id) })
	return n
}

func (s *sim) node(id int32) *simNode {
	for _, n := range s.nodes {
		if n.id == id {
			return n
		}
	}
	s.t.Fatalf("no node %d", id)
	return nil
}

func (s *sim) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%v ", s.clk.Now().Sub(simStart))+fmt.Sprintf(format, args...))
	if len(s.trace) > 60 {
		s.trace = s.trace[1:]
	}
}

func (s *sim) active(n *simNode) bool { return !n.crashed && !n.paused && !n.left }

// step is one round of a node's session loop (what run, session, keepAlive
// and watchLoop do between two waits): join if out of a session; renew when
// due; read the store (unless stale: the node acts on the view it had) and
// reconcile; end the session when the lease is lost.
func (s *sim) step(n *simNode, stale bool) {
	if !s.active(n) {
		return
	}
	defer s.check(fmt.Sprintf("step node %d", n.id))
	s.logf("step %d stale=%v", n.id, stale)
	if !n.inSession {
		n.c.revokeOld()
		if err := n.c.join(s.ctx); err != nil {
			n.c.releaseAll("join failed")
			return
		}
		n.inSession = true
		n.nextRenew = n.c.clk.Now().Add(s.ttl / 3)
	}
	if now := n.c.clk.Now(); !now.Before(n.nextRenew) {
		n.nextRenew = now.Add(s.ttl / 3)
		if err := n.c.renew(s.ctx); err == ErrLeaseNotFound {
			s.end(n)
			return
		}
	}
	if !stale {
		if _, err := n.c.load(s.ctx); err != nil {
			if !n.c.Serving() {
				s.end(n)
			}
			return
		}
	}
	if n.c.reconcile(s.ctx) {
		s.end(n)
	}
}

func (s *sim) end(n *simNode) {
	n.c.releaseAll("session ended")
	n.inSession = false
}

// round steps every active node once, then advances the clock by d.
func (s *sim) round(d time.Duration) {
	for _, n := range s.nodes {
		s.step(n, false)
	}
	s.advance(d)
}

func (s *sim) advance(d time.Duration) {
	s.clk.Advance(d)
	s.logf("advance %v", d)
	s.check("advance " + d.String())
}

// check is the invariant, checked after every action: a node that acts as
// owner of p (Owned: p served and the lease valid by its own clock) holds
// p's key in the store right now, by the true clock, through the key it
// acquired — so no two nodes own p at overlapping times. And what the
// cluster serves is exactly what its coordinator and fence were told.
func (s *sim) check(after string) {
	s.actions++
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf("after %s (action %d, t=%v): ", after, s.actions, s.clk.Now().Sub(simStart)) + fmt.Sprintf(format, args...)
		if s.violation != nil {
			s.violation(msg)
			return
		}
		s.t.Fatalf("%s\nlast actions:\n%s", msg, strings.Join(s.trace, "\n"))
	}
	holders := s.mem.Holders()
	mine := make([]map[int32]int64, len(s.nodes))
	serving := make([]bool, len(s.nodes))
	for i, n := range s.nodes {
		n.c.mu.Lock()
		mine[i] = maps.Clone(n.c.mine)
		n.c.mu.Unlock()
		serving[i] = n.c.Serving()
	}
	for p := int32(0); p < simParts; p++ {
		var owners []int32
		for i, n := range s.nodes {
			rev, ok := mine[i][p]
			if n.crashed || !ok || !serving[i] {
				continue
			}
			owners = append(owners, n.id)
			h, ok := holders[p]
			if !ok || h.Node != n.id || h.CreateRev != rev {
				fail("node %d acts as owner of partition %d but the store has %+v (present %v)", n.id, p, h, ok)
			}
		}
		if len(owners) > 1 {
			fail("partition %d owned by nodes %v at once", p, owners)
		}
	}
	for _, n := range s.nodes {
		if n.crashed {
			continue
		}
		mine := n.c.OwnedPartitions()
		var held, fenced []int32
		for p := range n.coord.held {
			held = append(held, p)
		}
		for p := range n.fence.revs {
			fenced = append(fenced, p)
		}
		slices.Sort(held)
		slices.Sort(fenced)
		if !slices.Equal(mine, held) || !slices.Equal(mine, fenced) {
			fail("node %d serves %v, its coordinator holds %v, its fence %v", n.id, mine, held, fenced)
		}
	}
}

// settled reports whether, by the store, every partition is held by its
// target among the registered nodes, and that node serves it.
func (s *sim) settled() bool {
	snap, err := s.mem.Load(s.ctx)
	if err != nil || len(snap.Nodes) == 0 {
		return false
	}
	var ids []int32
	for _, n := range snap.Nodes {
		ids = append(ids, n.ID)
	}
	for _, n := range s.nodes {
		if cut, _ := n.cl.faults(); s.active(n) && !cut && !slices.Contains(ids, n.id) {
			return false // not (yet, or again) registered
		}
	}
	target := Assign(simParts, ids)
	for p, t := range target {
		h, ok := s.mem.Holder(int32(p))
		if !ok || h.Node != t {
			return false
		}
		var owner *simNode
		for _, n := range s.nodes {
			if n.id == t && !n.crashed {
				owner = n
			}
		}
		if owner == nil || !owner.c.Owned(int32(p)) {
			return false
		}
	}
	return true
}

// settle runs rounds of tick (the production tick is 250 ms) until settled;
// it returns the simulated time it took.
func (s *sim) settle(tick, within time.Duration) time.Duration {
	s.t.Helper()
	start := s.clk.Now()
	for !s.settled() {
		if s.clk.Now().Sub(start) > within {
			s.t.Fatalf("not settled within %v\nlast actions:\n%s", within, strings.Join(s.trace, "\n"))
		}
		s.round(tick)
	}
	return s.clk.Now().Sub(start)
}

func startSim(t testing.TB, nodes int, ttl time.Duration) *sim {
	s := newSim(t, ttl)
	for i := 1; i <= nodes; i++ {
		s.add(int32(i), 1)
	}
	s.settle(250*time.Millisecond, 10*time.Second)
	return s
}

// forSizes runs f as a subtest for each cluster size lo..hi, on a settled
// cluster of that many nodes (3 s leases).
func forSizes(t *testing.T, lo, hi int, f func(t *testing.T, n int, s *sim)) {
	for n := lo; n <= hi; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) { f(t, n, startSim(t, n, 3*time.Second)) })
	}
}

// TestSimSettle: 3 to 7 nodes start together and settle on Assign's
// spread (⌊50/N⌋ or ⌈50/N⌉ each) within two rounds.
func TestSimSettle(t *testing.T) {
	for n := 3; n <= 7; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := newSim(t, 3*time.Second)
			var ids []int32
			for i := 1; i <= n; i++ {
				s.add(int32(i), 1)
				ids = append(ids, int32(i))
			}
			took := s.settle(250*time.Millisecond, 10*time.Second)
			if took > 500*time.Millisecond {
				t.Fatalf("settled after %v, want within two 250 ms rounds", took)
			}
			want := Assign(simParts, ids)
			for _, nd := range s.nodes {
				got := nd.c.OwnedPartitions()
				if k := len(got); k < simParts/n || k > (simParts+n-1)/n {
					t.Fatalf("node %d owns %d partitions", nd.id, k)
				}
				for _, p := range got {
					if want[p] != nd.id {
						t.Fatalf("node %d owns %d, Assign gives it to %d", nd.id, p, want[p])
					}
				}
			}
		})
	}
}

// TestSimJoinHandOver: a node joining a settled cluster of 3–6 gets its
// share by hand-over (release, delete, acquire) without waiting for any
// lease; exactly the partitions Assign moves change hands.
func TestSimJoinHandOver(t *testing.T) {
	forSizes(t, 3, 6, func(t *testing.T, n int, s *sim) {
		before := map[int32]int32{}
		for p := int32(0); p < simParts; p++ {
			h, _ := s.mem.Holder(p)
			before[p] = h.Node
		}
		s.add(int32(n+1), 1)
		took := s.settle(250*time.Millisecond, 10*time.Second)
		if took >= s.ttl {
			t.Fatalf("hand-over took %v, not shorter than the lease TTL", took)
		}
		var ids []int32
		for i := 1; i <= n+1; i++ {
			ids = append(ids, int32(i))
		}
		want := Assign(simParts, ids)
		handed := 0
		for p := int32(0); p < simParts; p++ {
			h, _ := s.mem.Holder(p)
			if h.Node != want[p] {
				t.Fatalf("partition %d on %d, want %d", p, h.Node, want[p])
			}
			if h.Node != before[p] {
				handed++
			}
		}
		if handed != moved(Assign(simParts, ids[:n]), want) {
			t.Fatalf("%d partitions moved, Assign moves %d", handed, moved(Assign(simParts, ids[:n]), want))
		}
		t.Logf("%d→%d nodes: %d partitions handed over in %v (simulated)", n, n+1, handed, took)
	})
}

// TestSimGracefulLeave: a node that leaves (Close: stop serving, revoke the
// lease) has its partitions re-owned within a round or two, long before its
// lease would have expired.
func TestSimGracefulLeave(t *testing.T) {
	forSizes(t, 3, 7, func(t *testing.T, n int, s *sim) {
		v := s.node(2)
		v.c.leave()
		v.left = true
		s.check("leave")
		if len(v.c.OwnedPartitions()) != 0 || v.c.Serving() {
			t.Fatal("a node that left still serves")
		}
		took := s.settle(250*time.Millisecond, 10*time.Second)
		if took > 500*time.Millisecond {
			t.Fatalf("re-owned after %v, want within two rounds", took)
		}
	})
}

// TestSimCrashFailover: a node that crashes (no cleanup) keeps its
// partitions until its lease expires in the store; then the others take
// them over within a round. Nobody acts on them before (the invariant),
// and the failover time is the lease's remaining life plus at most a round.
func TestSimCrashFailover(t *testing.T) {
	forSizes(t, 3, 7, func(t *testing.T, n int, s *sim) {
		// Run a while so renewals happen, then crash node 1.
		for i := 0; i < 7; i++ {
			s.round(250 * time.Millisecond)
		}
		v := s.node(1)
		lease := v.c.View().Lease
		expiry, ok := s.mem.LeaseExpiry(lease)
		if !ok {
			t.Fatal("victim's lease not in the store")
		}
		v.crashed = true
		crash := s.clk.Now()
		for s.clk.Now().Before(expiry) {
			s.round(50 * time.Millisecond)
			if s.clk.Now().Before(expiry) {
				for p := int32(0); p < simParts; p++ {
					if h, ok := s.mem.Holder(p); ok && h.Lease != lease && slices.Contains(v.c.OwnedPartitions(), p) {
						t.Fatalf("partition %d taken over before the victim's lease expired", p)
					}
				}
			}
		}
		took := s.settle(50*time.Millisecond, 10*time.Second)
		t.Logf("%d nodes: lease expired %v after the crash; re-owned %v later (simulated)", n, expiry.Sub(crash), took)
		if took > 100*time.Millisecond {
			t.Fatalf("re-owned %v after the lease expired", took)
		}
	})
}

// TestSimPause: a node whose process is frozen past its lease (it stops
// renewing and acting) loses its partitions to the others once the store
// expires its lease. When it resumes, its clock has moved: before it runs
// any step it already answers Serving false, and any write it had prepared
// compares a create revision the store no longer has. Then it rejoins with
// a new lease and gets its share back.
func TestSimPause(t *testing.T) {
	forSizes(t, 3, 7, func(t *testing.T, n int, s *sim) {
		v := s.node(2)
		fenced := maps.Clone(v.fence.revs)
		v.paused = true
		for i := 0; i < 40; i++ { // 2 s past the 3 s TTL
			s.round(125 * time.Millisecond)
		}
		if v.c.Serving() {
			t.Fatal("resumed node believes it still serves")
		}
		for p, rev := range fenced {
			if h, ok := s.mem.Holder(p); ok && h.CreateRev == rev {
				t.Fatalf("partition %d: the paused node's key still stands", p)
			}
			if h, _ := s.mem.Holder(p); h.Node == v.id {
				t.Fatalf("partition %d still held by the paused node", p)
			}
		}
		sessions := v.c.Sessions()
		v.paused = false
		s.settle(250*time.Millisecond, 10*time.Second)
		if v.c.Sessions() != sessions+1 || len(v.c.OwnedPartitions()) == 0 {
			t.Fatalf("resumed node: %d sessions (was %d), owns %v", v.c.Sessions(), sessions, v.c.OwnedPartitions())
		}
	})
}

// TestSimEtcdLoss: the store goes away for everyone (etcd quorum lost).
// Every node stops serving by its local deadline minus the margin, while
// the store (frozen) still has every key; nothing is acquired meanwhile.
// When the store comes back (leases extended by a TTL, as a new etcd leader
// does) the nodes start new sessions, revoke their old leases and settle.
func TestSimEtcdLoss(t *testing.T) {
	s := startSim(t, 5, 3*time.Second)
	s.round(250 * time.Millisecond)
	s.mem.SetDown(true)
	lost := s.clk.Now()
	for i := 0; i < 24; i++ { // 3 s
		s.round(125 * time.Millisecond)
	}
	for _, n := range s.nodes {
		if n.c.Serving() || len(n.c.OwnedPartitions()) > 0 {
			t.Fatalf("node %d still serves %v after %v without the store", n.id, n.c.OwnedPartitions(), s.clk.Now().Sub(lost))
		}
	}
	s.mem.SetDown(false)
	took := s.settle(250*time.Millisecond, 10*time.Second)
	t.Logf("store back: settled after %v (simulated)", took)
}

// TestSimNodeCutOff: one node loses the store (a network partition): it
// stops serving at its deadline minus the margin, before the store expires
// its lease; the others take its partitions after that; when it reconnects
// it rejoins. With 3 to 7 nodes.
func TestSimNodeCutOff(t *testing.T) {
	forSizes(t, 3, 7, func(t *testing.T, n int, s *sim) {
		v := s.node(int32(n))
		lease := v.c.View().Lease
		v.cl.Cut(true)
		var stopped, expired time.Time
		for i := 0; i < 100 && (stopped.IsZero() || expired.IsZero()); i++ {
			s.round(50 * time.Millisecond)
			if stopped.IsZero() && !v.c.Serving() {
				stopped = s.clk.Now()
			}
			if _, ok := s.mem.LeaseExpiry(lease); !ok && expired.IsZero() {
				expired = s.clk.Now()
			}
		}
		if stopped.IsZero() || expired.IsZero() || !stopped.Before(expired) {
			t.Fatalf("cut-off node stopped serving at %v, its lease expired at %v", stopped, expired)
		}
		s.settle(250*time.Millisecond, 10*time.Second) // without it
		v.cl.Cut(false)
		s.settle(250*time.Millisecond, 10*time.Second)
		if len(v.c.OwnedPartitions()) == 0 {
			t.Fatal("reconnected node got nothing back")
		}
	})
}

// TestSimLostAcquireReply: the store creates the keys a node acquires but
// the answers are lost; the node serves none of them, and on a later round
// adopts the keys of its own lease instead of waiting for them to expire.
func TestSimLostAcquireReply(t *testing.T) {
	s := newSim(t, 3*time.Second)
	a := s.add(1, 1)
	s.step(a, false) // joins, acquires all 50
	b := s.add(2, 1)
	b.cl.LoseReplies(true)
	s.step(b, false) // joins? no: its Grant answer is lost too
	if b.inSession {
		t.Fatal("join succeeded with lost answers")
	}
	b.cl.LoseReplies(false)
	s.step(b, false) // joins; a has everything, so b acquires nothing yet
	s.step(a, false) // a hands over b's share
	if _, err := b.c.load(s.ctx); err != nil {
		t.Fatal(err)
	}
	b.cl.LoseReplies(true)
	b.c.reconcile(s.ctx) // b's acquisitions land, it is told nothing
	s.check("reconcile with lost answers")
	if len(b.c.OwnedPartitions()) != 0 {
		t.Fatal("b serves partitions whose acquisition it never heard of")
	}
	keys := map[int32]int64{}
	for p := int32(0); p < simParts; p++ {
		if h, _ := s.mem.Holder(p); h.Node == 2 {
			keys[p] = h.CreateRev
		}
	}
	if len(keys) == 0 {
		t.Fatal("no key created by b")
	}
	b.cl.LoseReplies(false)
	s.step(b, false)
	mine := b.c.View().Mine
	for p, rev := range keys {
		if mine[p] != rev {
			t.Fatalf("partition %d: b serves it through key %d, its own lost acquisition created %d", p, mine[p], rev)
		}
	}
	if took := s.settle(250*time.Millisecond, time.Second); took != 0 {
		t.Fatalf("settled %v later, want at once", took)
	}
}

// TestSimRandom: seeded random schedules of 3–7 nodes with every fault:
// nodes stepped in any order, some on a stale view; time advanced by random
// amounts; crashes and restarts, pauses, nodes cut off from the store, lost
// answers, the store down, graceful leaves and rejoins. The invariant is
// checked after every action; at the end, everything healed, the cluster
// must settle.
func TestSimRandom(t *testing.T) {
	seeds := simSeeds(100, 20)
	for seed := int64(1); seed <= int64(seeds); seed++ {
		runRandom(t, seed, 400, 1, -1)
	}
}

// simSeeds is how many seeded schedules to run: COHORT_SIM_SEEDS if set,
// else n (short under -short).
func simSeeds(n, short int) int {
	if v, err := strconv.Atoi(os.Getenv("COHORT_SIM_SEEDS")); err == nil && v > 0 {
		return v
	}
	if testing.Short() {
		return short
	}
	return n
}

// runRandom runs one seeded schedule; rate is node 1's clock rate and
// margin the nodes' safety margin (-1: none, 0: default).
func runRandom(t testing.TB, seed int64, steps int, rate float64, margin time.Duration) {
	r := rand.New(rand.NewSource(seed))
	s := newSim(t, 3*time.Second)
	s.margin = margin
	n := 3 + r.Intn(5)
	for i := 1; i <= n; i++ {
		rt := 1.0
		if i == 1 {
			rt = rate
		}
		s.add(int32(i), rt)
	}
	storeDown := false
	pick := func() *simNode { return s.nodes[r.Intn(len(s.nodes))] }
	for i := 0; i < steps; i++ {
		switch x := r.Intn(100); {
		case x < 60:
			s.step(pick(), false)
		case x < 70:
			s.step(pick(), true)
		case x < 82:
			s.advance(time.Duration(1+r.Intn(800)) * time.Millisecond)
		case x < 85:
			if v := pick(); !v.crashed {
				s.logf("crash %d", v.id)
				v.crashed = true
			} else {
				s.logf("restart %d", v.id)
				s.add(v.id, 1)
			}
		case x < 88:
			v := pick()
			v.paused = !v.paused
			s.logf("paused %d: %v", v.id, v.paused)
		case x < 91:
			v := pick()
			cut, _ := v.cl.faults()
			v.cl.Cut(!cut)
			s.logf("cut %d: %v", v.id, !cut)
		case x < 94:
			v := pick()
			_, lose := v.cl.faults()
			v.cl.LoseReplies(!lose)
			s.logf("lose replies %d: %v", v.id, !lose)
		case x < 96:
			storeDown = !storeDown
			s.mem.SetDown(storeDown)
			s.logf("store down: %v", storeDown)
		default:
			v := pick()
			if v.left {
				s.logf("rejoin %d", v.id)
				v.left = false
			} else if s.active(v) {
				s.logf("leave %d", v.id)
				v.c.leave()
				v.inSession = false
				v.left = true
			}
		}
		s.check("action")
	}
	// Heal everything.
	s.mem.SetDown(false)
	for _, v := range s.nodes {
		if v.crashed {
			s.add(v.id, 1)
		}
	}
	for _, v := range s.nodes {
		v.paused, v.left = false, false
		v.cl.Cut(false)
		v.cl.LoseReplies(false)
	}
	s.settle(250*time.Millisecond, 4*s.ttl)
}

// TestSimInvariantCatchesSlowClock shows the invariant check has teeth: a
// node whose clock runs 5% slow, cut off from the store, believes its lease
// valid after the store expired it. With no safety margin the others take
// its partitions while it still acts as owner, and the check reports it;
// with the default margin (TTL/10, enough for clocks up to 10% slow) it has
// stopped in time and nothing is reported.
func TestSimInvariantCatchesSlowClock(t *testing.T) {
	run := func(margin time.Duration) []string {
		s := newSim(t, 3*time.Second)
		s.margin = margin
		var violations []string
		s.violation = func(m string) { violations = append(violations, m) }
		s.add(1, 0.95)
		s.add(2, 1)
		s.add(3, 1)
		s.settle(250*time.Millisecond, 10*time.Second)
		s.node(1).cl.Cut(true)
		for i := 0; i < 100; i++ {
			s.round(50 * time.Millisecond)
		}
		return violations
	}
	if v := run(-1); len(v) == 0 {
		t.Fatal("no violation found with a 5% slow clock and no margin")
	} else {
		t.Logf("without a margin: %d violations, first: %s", len(v), v[0])
	}
	if v := run(0); len(v) != 0 {
		t.Fatalf("with the default margin: %s", v[0])
	}
}

// TestSimRandomSlowClock: the random schedules with node 1's clock 8% slow
// and the default margin keep the invariant.
func TestSimRandomSlowClock(t *testing.T) {
	seeds := simSeeds(40, 10)
	for seed := int64(1); seed <= int64(seeds); seed++ {
		runRandom(t, seed, 400, 0.92, 0)
	}
}

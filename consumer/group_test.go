package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
)

const session = time.Second

// groupBackends runs fn against cohort and kfake, each with topic "events"
// of 6 partitions.
func groupBackends(t *testing.T, fn func(t *testing.T, addr string)) {
	testwait.WallClock(t, "consumer groups against a live coordinator, 1 s sessions")
	t.Run("cohort", func(t *testing.T) {
		n := membertest.StartCohort(t, nil)
		if _, err := n.Catalog().Create("events", 6, nil); err != nil {
			t.Fatal(err)
		}
		fn(t, n.Addr())
	})
	t.Run("kfake", func(t *testing.T) { fn(t, membertest.StartKfake(t, kfake.SeedTopics(6, "events"))) })
}

// owners records which member owns which partition, from the callbacks,
// and flags any moment where two members own the same partition.
type owners struct {
	mu        sync.Mutex
	owner     map[int32]string
	adds      map[int32]int
	violation string
}

func newOwners() *owners { return &owners{owner: map[int32]string{}, adds: map[int32]int{}} }

func (o *owners) add(name string, tps []assign.TopicPartitions) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range tps {
		for _, p := range t.Partitions {
			if cur := o.owner[p]; cur != "" && o.violation == "" {
				o.violation = fmt.Sprintf("partition %d assigned to %s while %s owns it", p, name, cur)
			}
			o.owner[p] = name
			o.adds[p]++
		}
	}
}

func (o *owners) remove(name string, tps []assign.TopicPartitions) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range tps {
		for _, p := range t.Partitions {
			if o.owner[p] == name {
				delete(o.owner, p)
			}
		}
	}
}

// waitSplit waits until every partition is owned and each member owns want.
func (o *owners) waitSplit(t *testing.T, members []string, want int) map[int32]string {
	t.Helper()
	var snap map[int32]string
	if testwait.Until(15*time.Second, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.violation != "" {
			t.Fatal(o.violation)
		}
		counts := map[string]int{}
		for _, m := range o.owner {
			counts[m]++
		}
		ok := len(o.owner) == 6
		for _, m := range members {
			ok = ok && counts[m] == want
		}
		snap = map[int32]string{}
		for p, m := range o.owner {
			snap[p] = m
		}
		return ok
	}) {
		return snap
	}
	t.Fatalf("partitions not split %d each over %v: %v", want, members, o.owner)
	return nil
}

func startGroup(t *testing.T, addr, name string, o *owners, as ...assign.Assignor) *consumer.Group {
	t.Helper()
	return startGroupLog(t, addr, name, o, membertest.Logger(t), as...)
}

// startGroupLog is startGroup with the member's logger.
func startGroupLog(t *testing.T, addr, name string, o *owners, log *slog.Logger, as ...assign.Assignor) *consumer.Group {
	t.Helper()
	g, err := consumer.StartGroup(consumer.GroupConfig{
		Member: member.Config{
			Group: "cg", SessionTimeout: session, RebalanceTimeout: 3 * time.Second, HeartbeatInterval: session / 5,
			Logger: log.With("consumer", name),
		},
		Client:    membertest.Client(t, addr),
		Topics:    []string{"events"},
		Assignors: as,
		Assigned:  func(_ context.Context, _ member.Generation, added []assign.TopicPartitions) { o.add(name, added) },
		Revoked:   func(tps []assign.TopicPartitions) { o.remove(name, tps) },
		Lost:      func(tps []assign.TopicPartitions) { o.remove(name, tps) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Abandon)
	return g
}

func TestGroupRangeCommitFetch(t *testing.T) {
	groupBackends(t, func(t *testing.T, addr string) {
		o := newOwners()
		a := startGroup(t, addr, "a", o)
		b := startGroup(t, addr, "b", o)
		c := startGroup(t, addr, "c", o)
		o.waitSplit(t, []string{"a", "b", "c"}, 2)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, g := range []*consumer.Group{a, b, c} {
			offs := map[int32]int64{}
			for _, t := range g.Assignment() {
				for _, p := range t.Partitions {
					offs[p] = int64(100 + p)
				}
			}
			if err := g.Commit(ctx, map[string]map[int32]int64{"events": offs}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := a.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 6; p++ {
			if got["events"][p] != int64(100+p) {
				t.Fatalf("partition %d committed %d", p, got["events"][p])
			}
		}
	})
}

// TestGroupCooperativeSticky: members join one by one under the
// cooperative-sticky assignor; no partition is ever owned by two members,
// the first member keeps the partitions it may keep, and each partition
// moves at most once per change.
func TestGroupCooperativeSticky(t *testing.T) {
	groupBackends(t, func(t *testing.T, addr string) {
		o := newOwners()
		startGroup(t, addr, "a", o, sticky.NewCooperative())
		s1 := o.waitSplit(t, []string{"a"}, 6)
		startGroup(t, addr, "b", o, sticky.NewCooperative())
		s2 := o.waitSplit(t, []string{"a", "b"}, 3)
		startGroup(t, addr, "c", o, sticky.NewCooperative())
		s3 := o.waitSplit(t, []string{"a", "b", "c"}, 2)
		moved := func(x, y map[int32]string) (n int) {
			for p := range x {
				if x[p] != y[p] {
					n++
				}
			}
			return n
		}
		if m12, m23 := moved(s1, s2), moved(s2, s3); m12 != 3 || m23 != 2 {
			t.Fatalf("moved %d then %d partitions, minimum 3 then 2", m12, m23)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		for p, n := range o.adds {
			if n > 3 {
				t.Fatalf("partition %d assigned %d times over two changes", p, n)
			}
		}
	})
}

// TestGroupCallbackAfterStartGroupSeesTheMember: a cooperative member that
// gives partitions up rejoins from its member's goroutine, which Start has
// running before StartGroup stored the member. Under the race detector the
// rejoin's read must be ordered after that store; in a test process almost
// anything orders them (every socket write and read does, as do a shared
// logger or callback state under a lock), so here nothing that comes after
// StartGroup(a) in the test goroutine reaches a: b is started by a goroutine
// that a's own first assignment wakes, with a client made beforehand, and
// the test goroutine only waits. That is a consumer whose broker and peers
// are other processes, as in examples/consumer.
func TestGroupCallbackAfterStartGroupSeesTheMember(t *testing.T) {
	groupBackends(t, func(t *testing.T, addr string) {
		config := func(want int, reached chan struct{}) consumer.GroupConfig {
			n := 0 // owned partitions; only the member's callbacks touch it
			var once sync.Once
			return consumer.GroupConfig{
				Member: member.Config{
					Group: "cg", SessionTimeout: session, RebalanceTimeout: 3 * time.Second, HeartbeatInterval: session / 5,
					Logger: slog.New(slog.DiscardHandler),
				},
				Client:    membertest.Client(t, addr),
				Topics:    []string{"events"},
				Assignors: []assign.Assignor{sticky.NewCooperative()},
				Assigned: func(_ context.Context, _ member.Generation, added []assign.TopicPartitions) {
					for _, tp := range added {
						n += len(tp.Partitions)
					}
					if n == want {
						once.Do(func() { close(reached) })
					}
				},
				Revoked: func(tps []assign.TopicPartitions) {
					for _, tp := range tps {
						n -= len(tp.Partitions)
					}
				},
			}
		}
		aAll, bHalf := make(chan struct{}), make(chan struct{})
		aCfg, bCfg := config(6, aAll), config(3, bHalf)
		var a, b *consumer.Group
		bStarted := make(chan error, 1)
		t.Cleanup(func() {
			if a != nil {
				a.Abandon()
			}
			if err := <-bStarted; err == nil {
				b.Abandon()
			}
		})
		go func() {
			select {
			case <-aAll:
			case <-time.After(15 * time.Second):
				bStarted <- errors.New("a: not all 6 partitions")
				return
			}
			// b gets its 3 only after a revoked 3 and rejoined.
			var err error
			b, err = consumer.StartGroup(bCfg)
			bStarted <- err
		}()
		var err error
		if a, err = consumer.StartGroup(aCfg); err != nil {
			t.Fatal(err)
		}
		select {
		case <-bHalf:
		case <-time.After(15 * time.Second):
			t.Fatal("b: not 3 partitions")
		}
	})
}

// TestGroupCommitOnRevoke: marked offsets are committed when the partitions
// are revoked (here: on Close, eager range).
func TestGroupCommitOnRevoke(t *testing.T) {
	groupBackends(t, func(t *testing.T, addr string) {
		o := newOwners()
		a := startGroup(t, addr, "a", o)
		o.waitSplit(t, []string{"a"}, 6)
		for p := int32(0); p < 6; p++ {
			a.Mark("events", p, int64(7+p))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		b := startGroup(t, addr, "b", o)
		got, err := b.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 6; p++ {
			if got["events"][p] != int64(7+p) {
				t.Fatalf("partition %d: committed %d after revoke", p, got["events"][p])
			}
		}
	})
}

// TestGroupCommitsTopicsOutsideTheCatalog: a group whose client the group
// creates commits and fetches offsets by name (v9), so a topic cohort's
// catalog does not have (it has no topic ID for v10) is committed and
// fetched along with a catalog topic.
func TestGroupCommitsTopicsOutsideTheCatalog(t *testing.T) {
	n := membertest.StartCohort(t, nil)
	if _, err := n.Catalog().Create("events", 6, nil); err != nil {
		t.Fatal(err)
	}
	o := newOwners()
	g, err := consumer.StartGroup(consumer.GroupConfig{
		Member: member.Config{
			Brokers: []string{n.Addr()}, Group: "outside", SessionTimeout: session, RebalanceTimeout: 3 * time.Second,
			HeartbeatInterval: session / 5, Logger: membertest.Logger(t),
		},
		Topics:   []string{"events"},
		Assigned: func(_ context.Context, _ member.Generation, added []assign.TopicPartitions) { o.add("a", added) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Abandon)
	o.waitSplit(t, []string{"a"}, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Commit(ctx, map[string]map[int32]int64{"events": {0: 5}, "elsewhere": {2: 9}}); err != nil {
		t.Fatal(err)
	}
	got, err := g.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got["events"][0] != 5 || got["elsewhere"][2] != 9 {
		t.Errorf("fetched %v, want events/0 at 5 and elsewhere/2 at 9", got)
	}
}

// TestGroupMixedAssignorListRunsEager: the first step of the KIP-429
// upgrade. A member configured with [cooperative-sticky, range] is accepted
// and follows the eager protocol (Kafka picks the highest protocol all of a
// member's assignors support): when a cooperative-only member joins, it
// revokes everything before rejoining, the coordinator picks
// cooperative-sticky, and no partition is ever owned twice.
func TestGroupMixedAssignorListRunsEager(t *testing.T) {
	testwait.WallClock(t, "consumer groups against a live coordinator, 1 s sessions")
	n := membertest.StartCohort(t, nil)
	if _, err := n.Catalog().Create("events", 6, nil); err != nil {
		t.Fatal(err)
	}
	o := newOwners()
	var mu sync.Mutex
	var revokedByA []int // sizes of a's Revoked calls
	a, err := consumer.StartGroup(consumer.GroupConfig{
		Member: member.Config{
			Group: "cg", SessionTimeout: session, RebalanceTimeout: 3 * time.Second, HeartbeatInterval: session / 5,
			Logger: membertest.Logger(t).With("consumer", "a"),
		},
		Client:    membertest.Client(t, n.Addr()),
		Topics:    []string{"events"},
		Assignors: []assign.Assignor{sticky.NewCooperative(), assign.Range()},
		Assigned:  func(_ context.Context, _ member.Generation, added []assign.TopicPartitions) { o.add("a", added) },
		Revoked: func(tps []assign.TopicPartitions) {
			k := 0
			for _, tp := range tps {
				k += len(tp.Partitions)
			}
			mu.Lock()
			revokedByA = append(revokedByA, k)
			mu.Unlock()
			o.remove("a", tps)
		},
		Lost: func(tps []assign.TopicPartitions) { o.remove("a", tps) },
	})
	if err != nil {
		t.Fatalf("StartGroup with [cooperative-sticky, range]: %v", err)
	}
	t.Cleanup(a.Abandon)
	o.waitSplit(t, []string{"a"}, 6)
	startGroup(t, n.Addr(), "b", o, sticky.NewCooperative())
	o.waitSplit(t, []string{"a", "b"}, 3)
	if g, _ := a.Generation(); g.Protocol != "cooperative-sticky" {
		t.Errorf("protocol %q, want cooperative-sticky (the first one both members support)", g.Protocol)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(revokedByA) == 0 || revokedByA[0] != 6 {
		t.Fatalf("a's revocations %v: an eager member revokes all 6 partitions when the rebalance starts", revokedByA)
	}
}

// movingCoop is range announced as cooperative: it moves owned partitions
// in one round, which a cooperative leader must not hand out.
type movingCoop struct{ assign.Assignor }

func (movingCoop) Name() string      { return "moving-coop" }
func (movingCoop) Cooperative() bool { return true }

// TestGroupWithholdsDirectMovesOfACooperativeAssignor: an assignor that
// says it is cooperative but hands a's partitions straight to b: the leader
// withholds them until a has revoked them (KIP-429), so b gets them only in
// a generation after the one in which a gave them up, and the group still
// converges.
func TestGroupWithholdsDirectMovesOfACooperativeAssignor(t *testing.T) {
	groupBackends(t, func(t *testing.T, addr string) {
		o := newOwners()
		var mu sync.Mutex
		revokedIn := map[int32]int32{}  // partition -> generation a revoked it in
		assignedIn := map[int32]int32{} // partition -> generation b was given it in
		groups := map[string]*consumer.Group{}
		start := func(name string) {
			g, err := consumer.StartGroup(consumer.GroupConfig{
				Member: member.Config{
					Group: "cg", SessionTimeout: session, RebalanceTimeout: 3 * time.Second, HeartbeatInterval: session / 5,
					Logger: membertest.Logger(t).With("consumer", name),
				},
				Client:    membertest.Client(t, addr),
				Topics:    []string{"events"},
				Assignors: []assign.Assignor{movingCoop{assign.Range()}},
				Assigned: func(_ context.Context, gen member.Generation, added []assign.TopicPartitions) {
					mu.Lock()
					for _, tp := range added {
						for _, p := range tp.Partitions {
							if name == "b" {
								assignedIn[p] = gen.ID
							}
						}
					}
					mu.Unlock()
					o.add(name, added)
				},
				Revoked: func(tps []assign.TopicPartitions) {
					mu.Lock()
					gen, _ := groups[name].Generation()
					for _, tp := range tps {
						for _, p := range tp.Partitions {
							revokedIn[p] = gen.ID
						}
					}
					mu.Unlock()
					o.remove(name, tps)
				},
				Lost: func(tps []assign.TopicPartitions) { o.remove(name, tps) },
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Abandon)
			mu.Lock()
			groups[name] = g
			mu.Unlock()
		}
		start("a")
		o.waitSplit(t, []string{"a"}, 6)
		start("b")
		o.waitSplit(t, []string{"a", "b"}, 3) // fails on a double ownership it sees
		mu.Lock()
		defer mu.Unlock()
		for p, gb := range assignedIn {
			if ga, ok := revokedIn[p]; !ok || gb <= ga {
				t.Errorf("partition %d given to b in generation %d; a revoked it in generation %d (ok %v)", p, gb, ga, ok)
			}
		}
	})
}

// gatedAssignor holds the leader's Assign until gate is closed.
type gatedAssignor struct {
	assign.Assignor
	gate *atomic.Pointer[chan struct{}]
}

func (g gatedAssignor) Assign(ms []assign.Member, ts map[string]assign.Topic) (map[string]assign.Assignment, error) {
	if c := g.gate.Load(); c != nil {
		<-*c
	}
	return g.Assignor.Assign(ms, ts)
}

// signalLog passes records on to a logger's handler and closes ch at the
// first record with msg, whatever its level.
type signalLog struct {
	slog.Handler
	msg  string
	ch   chan struct{}
	once *sync.Once
}

func newSignalLog(base *slog.Logger, msg string) (*slog.Logger, <-chan struct{}) {
	h := signalLog{Handler: base.Handler(), msg: msg, ch: make(chan struct{}), once: new(sync.Once)}
	return slog.New(h), h.ch
}

func (h signalLog) Enabled(context.Context, slog.Level) bool { return true }
func (h signalLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.ch) })
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}
func (h signalLog) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}
func (h signalLog) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

// closeDuringSync starts cooperative members a (the leader, whose
// assignor waits for the gate) and b, has b mark an offset for each of its
// partitions, and starts a rebalance that parks b's SyncGroup until the
// gate opens. It returns the gate and the offsets b marked.
func closeDuringSync(t *testing.T, addr string, blog *slog.Logger) (a, b *consumer.Group, gate chan struct{}, marked map[int32]int64) {
	t.Helper()
	var g atomic.Pointer[chan struct{}]
	o := newOwners()
	a = startGroup(t, addr, "a", o, gatedAssignor{sticky.NewCooperative(), &g})
	o.waitSplit(t, []string{"a"}, 6)
	b = startGroupLog(t, addr, "b", o, blog, gatedAssignor{sticky.NewCooperative(), &g})
	o.waitSplit(t, []string{"a", "b"}, 3)
	// Rejoin is ignored unless stable: wait until both have synced.
	testwait.For(t, 10*time.Second, "a and b stable in one generation", func() bool {
		ga, sa := a.Generation()
		gb, sb := b.Generation()
		return sa && sb && ga.ID == gb.ID
	})
	if g, _ := a.Generation(); !g.Leader {
		t.Fatal("a does not lead")
	}
	marked = map[int32]int64{}
	for _, tp := range b.Assignment() {
		for _, p := range tp.Partitions {
			b.Mark(tp.Topic, p, 42)
			marked[p] = 42
		}
	}
	gb, _ := b.Generation()
	// The next rebalance parks b's SyncGroup until the gate opens.
	gate = make(chan struct{})
	g.Store(&gate)
	a.Rejoin()
	testwait.For(t, 10*time.Second, "b joined the next generation", func() bool {
		g, stable := b.Generation()
		return g.ID > gb.ID && !stable
	})
	return a, b, gate, marked
}

// TestGroupCloseDuringCooperativeSyncCommitsMarks: a cooperative member
// closed while it waits for the leader's assignment (the coordinator is in
// CompletingRebalance, which refuses commits) lets the rebalance complete,
// commits its marked offsets in the new generation, and leaves. It
// returned a *consumer.CommitError (REBALANCE_IN_PROGRESS) instead: it left
// without waiting for the assignment.
func TestGroupCloseDuringCooperativeSyncCommitsMarks(t *testing.T) {
	testwait.WallClock(t, "consumer groups against a live coordinator, 1 s sessions")
	n := membertest.StartCohort(t, nil)
	if _, err := n.Catalog().Create("events", 6, nil); err != nil {
		t.Fatal(err)
	}
	blog, waiting := newSignalLog(membertest.Logger(t), "closing once the rebalance under way completes")
	a, b, gate, want := closeDuringSync(t, n.Addr(), blog)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- b.Close(ctx) }()
	select {
	case <-waiting: // b waits for its SyncGroup: let the leader assign
		close(gate)
	case err := <-closed:
		close(gate)
		t.Fatalf("Close returned %v without waiting for the rebalance under way", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	got, err := a.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p, o := range want {
		if got["events"][p] != o {
			t.Errorf("committed offset of events/%d: %d, want %d (committed: %v)", p, got["events"][p], o, got)
		}
	}
}

// TestGroupCloseDuringStuckCooperativeSyncReportsUncommittedMarks: when the
// leader's assignment does not come within half of Close's time, the member
// stops waiting and revokes in the generation it has, which the
// coordinator refuses while it waits for the assignment: Close says so
// with a *consumer.CommitError naming the offsets not committed.
func TestGroupCloseDuringStuckCooperativeSyncReportsUncommittedMarks(t *testing.T) {
	testwait.WallClock(t, "consumer groups against a live coordinator, 1 s sessions")
	n := membertest.StartCohort(t, nil)
	if _, err := n.Catalog().Create("events", 6, nil); err != nil {
		t.Fatal(err)
	}
	_, b, gate, want := closeDuringSync(t, n.Addr(), membertest.Logger(t))
	defer close(gate)
	// Half of it (1 s) is well within the coordinator's sync deadline and
	// b's own rebalance limit (3 s, less the margin, from its join).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := b.Close(ctx)
	var ce *consumer.CommitError
	if !errors.As(err, &ce) {
		t.Fatalf("Close returned %v, want a *consumer.CommitError", err)
	}
	if !errors.Is(err, kerr.RebalanceInProgress) {
		t.Errorf("Close returned %v, want REBALANCE_IN_PROGRESS", err)
	}
	if !reflect.DeepEqual(ce.Offsets, map[string]map[int32]int64{"events": want}) {
		t.Errorf("uncommitted offsets %v, want events: %v", ce.Offsets, want)
	}
}

// TestCommitWithoutGenerationIsErrNoGeneration: a member that never got an
// answer from the coordinator has no generation; Commit says so with a
// sentinel callers can test for, and sends nothing.
func TestCommitWithoutGenerationIsErrNoGeneration(t *testing.T) {
	// A listener that never accepts: the connection waits in its backlog
	// and no request is ever answered, so the member cannot join. (A
	// membertest.Filter in Member.Client would not do: StartGroup gives
	// the member its own kgo client, and the member joined a live node
	// before Commit ran when the machine was loaded.)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	g, err := consumer.StartGroup(consumer.GroupConfig{
		Member: member.Config{
			Brokers: []string{ln.Addr().String()}, Group: "unjoined", SessionTimeout: session, RebalanceTimeout: 3 * time.Second,
			HeartbeatInterval: session / 5, Logger: membertest.Logger(t),
		},
		Topics: []string{"events"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Abandon)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = g.Commit(ctx, map[string]map[int32]int64{"events": {0: 5}})
	if !errors.Is(err, consumer.ErrNoGeneration) {
		t.Fatalf("commit without a generation: %v, want ErrNoGeneration", err)
	}
}

package election_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/election"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
)

const (
	session   = time.Second
	rebalance = 2 * time.Second
)

func memberConfig(t *testing.T, cl member.Requester, name string) member.Config {
	return member.Config{
		Client:            cl,
		Group:             "writers",
		SessionTimeout:    session,
		RebalanceTimeout:  rebalance,
		HeartbeatInterval: session / 5,
		LostMargin:        session / 4,
		Logger:            membertest.Logger(t).With("candidate", name),
	}
}

type interval struct {
	name       string
	token      int32
	start, end time.Time
}

// world is the shared resource the writers write to, behind a Fence, and
// the record of who wrote when.
type world struct {
	fence    election.Fence
	mu       sync.Mutex
	writes   []int32 // tokens of the accepted writes, in order
	rejected int
	terms    []interval
	active   map[string]int // index into terms of the running term
	started  chan interval
}

func newWorld() *world {
	return &world{active: map[string]int{}, started: make(chan interval, 100)}
}

func (w *world) writer(name string) election.Func {
	return func(ctx context.Context, token int32) {
		w.mu.Lock()
		iv := interval{name: name, token: token, start: time.Now()}
		w.terms = append(w.terms, iv)
		w.active[name] = len(w.terms) - 1
		w.mu.Unlock()
		w.started <- iv
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				w.mu.Lock()
				w.terms[w.active[name]].end = time.Now()
				delete(w.active, name)
				w.mu.Unlock()
				return
			case <-tick.C:
			}
			err := w.fence.Do(token, func() error {
				w.mu.Lock()
				w.writes = append(w.writes, token)
				w.mu.Unlock()
				return nil
			})
			var stale *election.StaleTokenError
			if errors.As(err, &stale) {
				w.mu.Lock()
				w.rejected++
				w.mu.Unlock()
			}
		}
	}
}

type candidate struct {
	name string
	cl   *kgo.Client
	e    *election.Election
}

func TestFiveCandidatesKillTheWriter(t *testing.T) {
	testwait.WallClock(t, "failovers against a live coordinator, 1 s sessions")
	for _, backend := range []string{"cohort", "kfake"} {
		t.Run(backend, func(t *testing.T) {
			var addr string
			if backend == "cohort" {
				addr = membertest.StartCohort(t, nil).Addr()
			} else {
				addr = membertest.StartKfake(t)
			}
			runKills(t, addr, 6)
		})
	}
}

func runKills(t *testing.T, addr string, kills int) {
	w := newWorld()
	cands := map[string]*candidate{}
	seq := 0
	spawn := func() {
		seq++
		name := fmt.Sprintf("c%d", seq)
		cl := membertest.Client(t, addr)
		e, err := election.Start(election.Config{Member: memberConfig(t, cl, name)}, w.writer(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Abandon)
		cands[name] = &candidate{name: name, cl: cl, e: e}
	}
	for range 5 {
		spawn()
	}
	nextWriter := func(d time.Duration) interval {
		t.Helper()
		select {
		case iv := <-w.started:
			return iv
		case <-time.After(d):
			t.Fatalf("no writer within %v", d)
		}
		panic("unreachable")
	}
	cur := nextWriter(15 * time.Second)
	var failovers []time.Duration
	for k := range kills {
		c := cands[cur.name]
		killed := time.Now()
		switch k % 3 {
		case 0: // crash: no LeaveGroup, nothing runs any more
			c.e.Abandon()
		case 1: // connections cut: the process lives on as a zombie and
			// must stop writing by itself
			c.cl.Close()
		case 2: // graceful: stop writing, then LeaveGroup
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := c.e.Close(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		delete(cands, cur.name)
		spawn()
		next := nextWriter(session + rebalance + 2*time.Second)
		if next.token <= cur.token {
			t.Fatalf("token went from %d to %d", cur.token, next.token)
		}
		d := next.start.Sub(killed)
		failovers = append(failovers, d)
		t.Logf("kill %d (%s) of %s token %d -> %s token %d after %v", k, []string{"crash", "zombie", "close"}[k%3], cur.name, cur.token, next.name, next.token, d)
		if k%3 != 2 && d > session+rebalance {
			t.Fatalf("failover took %v, more than session timeout + one rebalance", d)
		}
		cur = next
	}
	// The last writer writes, then everyone stops.
	testwait.For(t, 10*time.Second, "a write by the last writer", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.writes) > 0 && w.writes[len(w.writes)-1] == cur.token
	})
	for _, c := range cands {
		c.e.Abandon()
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	// Writes were admitted in token order.
	if !slices.IsSorted(w.writes) {
		t.Fatal("a write with an older token was accepted after a newer one")
	}
	// Terms never overlap.
	terms := slices.Clone(w.terms)
	sort.Slice(terms, func(i, j int) bool { return terms[i].start.Before(terms[j].start) })
	for i := 1; i < len(terms); i++ {
		prev := terms[i-1]
		if prev.end.IsZero() || terms[i].start.Before(prev.end) {
			t.Fatalf("%s (token %d) started at %v while %s (token %d) was active until %v",
				terms[i].name, terms[i].token, terms[i].start, prev.name, prev.token, prev.end)
		}
	}
	sorted := slices.Clone(failovers)
	slices.Sort(sorted)
	t.Logf("%d terms, %d writes accepted, %d rejected by the fence; failover min %v median %v max %v (session %v)",
		len(terms), len(w.writes), w.rejected, sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1], session)
}

// TestWriterKeepsRoleAcrossRebalances: candidates joining and leaving do not
// move the role from a writer that stays.
func TestWriterKeepsRoleAcrossRebalances(t *testing.T) {
	testwait.WallClock(t, "rebalances against a live coordinator, 1 s sessions")
	addr := membertest.StartCohort(t, nil).Addr()
	w := newWorld()
	start := func(name string) *election.Election {
		e, err := election.Start(election.Config{Member: memberConfig(t, membertest.Client(t, addr), name)}, w.writer(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Abandon)
		return e
	}
	first := start("a")
	iv := <-w.started
	if iv.name != "a" {
		t.Fatalf("writer %s", iv.name)
	}
	var others []*election.Election
	for _, n := range []string{"b", "c", "d"} {
		others = append(others, start(n))
	}
	// Each join rebalances the group; give them a session to settle. This
	// wall-clock window is the behaviour under test (no move while members
	// join), not a wait for an event.
	time.Sleep(session)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	others[0].Close(ctx)
	others[1].Abandon()
	// Observation window on the wall clock (the behaviour under test): the
	// abandoned one expires after its session and the group rebalances; the
	// role must not move meanwhile.
	time.Sleep(session + rebalance)
	select {
	case iv := <-w.started:
		t.Fatalf("role moved to %s (token %d) although the writer stayed", iv.name, iv.token)
	default:
	}
	if first.Token() != iv.token {
		t.Fatalf("writer token %d, started with %d", first.Token(), iv.token)
	}
}

func TestFence(t *testing.T) {
	var f election.Fence
	for _, tok := range []int32{3, 3, 5} {
		if err := f.Admit(tok); err != nil {
			t.Fatal(err)
		}
	}
	var stale *election.StaleTokenError
	if err := f.Admit(4); !errors.As(err, &stale) || stale.Highest != 5 {
		t.Fatalf("admit 4 after 5: %v", err)
	}
	if f.Highest() != 5 {
		t.Fatal(f.Highest())
	}
}

// TestStaticTakeoverGetsANewTerm: a second process started with the writer's
// static instance id takes over the writer's member in the group without a
// rebalance (Kafka's static membership) and is handed the writer's
// assignment, token included. It must not write under that token, which the
// first process may still be using (a fence cannot tell them apart): it
// refuses the assignment and rejoins, and writes only under a new, higher
// token, so that the fence refuses the first process from then on. Whether
// the first process still reaches the coordinator (it is then fenced at its
// next heartbeat) or not (it writes until its own deadline).
func TestStaticTakeoverGetsANewTerm(t *testing.T) {
	testwait.WallClock(t, "static takeover against a live coordinator, 1 s sessions")
	for _, backend := range []string{"cohort", "kfake"} {
		for _, cutOff := range []bool{false, true} {
			name := backend
			if cutOff {
				name += "/first-cut-off"
			}
			t.Run(name, func(t *testing.T) {
				var addr string
				if backend == "cohort" {
					addr = membertest.StartCohort(t, nil).Addr()
				} else {
					addr = membertest.StartKfake(t)
				}
				w := newWorld()
				fa := &membertest.Filter{R: membertest.Client(t, addr)}
				ca := memberConfig(t, fa, "A")
				ca.InstanceID = "writer-1"
				a, err := election.Start(election.Config{Member: ca}, w.writer("A"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(a.Abandon)
				ivA := <-w.started
				if cutOff {
					fa.SetBlock(func(kmsg.Request) bool { return true })
				}
				cb := memberConfig(t, membertest.Client(t, addr), "B")
				cb.InstanceID = "writer-1"
				b, err := election.Start(election.Config{Member: cb}, w.writer("B"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Abandon)
				var ivB interval
				select {
				case ivB = <-w.started:
				case <-time.After(15 * time.Second):
					t.Fatal("B never became the writer")
				}
				if ivB.name != "B" || ivB.token <= ivA.token {
					t.Fatalf("%s started writing with token %d; A's term had %d: want B under a higher token", ivB.name, ivB.token, ivA.token)
				}
				// From B's first admitted write on, no write of A's token.
				testwait.For(t, 5*time.Second, "B's first write", func() bool {
					w.mu.Lock()
					defer w.mu.Unlock()
					return slices.Contains(w.writes, ivB.token)
				})
				time.Sleep(50 * time.Millisecond) // both may still run
				w.mu.Lock()
				defer w.mu.Unlock()
				first := slices.Index(w.writes, ivB.token)
				for _, tok := range w.writes[first:] {
					if tok != ivB.token {
						t.Fatalf("a write with token %d admitted after B's first under %d", tok, ivB.token)
					}
				}
			})
		}
	}
}

// TestWriterReturningGivesUpTheRole: a Func that returns on its own (its
// resource failed, say) while its context is still live ends the term: the
// process no longer claims the role, and the group chooses a writer again,
// under a new token, instead of leaving the role for ever with a process
// that no longer writes. Candidate a returns at once from every term; once
// b has joined, b gets the role (the group may pick a again first: it picks
// the smallest member id among candidates that claim nothing).
func TestWriterReturningGivesUpTheRole(t *testing.T) {
	testwait.WallClock(t, "re-election against a live coordinator, 1 s sessions")
	addr := membertest.StartCohort(t, nil).Addr()
	start := func(name string, fn election.Func) *election.Election {
		e, err := election.Start(election.Config{Member: memberConfig(t, membertest.Client(t, addr), name)}, fn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Abandon)
		return e
	}
	var mu sync.Mutex
	var aTokens []int32
	aFirst := make(chan int32, 1)
	a := start("a", func(_ context.Context, token int32) {
		mu.Lock()
		aTokens = append(aTokens, token)
		mu.Unlock()
		select {
		case aFirst <- token:
		default:
		}
	})
	first := <-aFirst
	testwait.For(t, 10*time.Second, "a gives up its first term", func() bool { return a.Token() != first })
	bToken := make(chan int32, 1)
	start("b", func(ctx context.Context, token int32) {
		bToken <- token
		<-ctx.Done()
	})
	select {
	case tok := <-bToken:
		mu.Lock()
		defer mu.Unlock()
		if last := aTokens[len(aTokens)-1]; tok <= last {
			t.Fatalf("b writes under token %d, a's last term had %d", tok, last)
		}
		t.Logf("a had %d terms (tokens %d to %d); b writes under token %d", len(aTokens), aTokens[0], aTokens[len(aTokens)-1], tok)
	case <-time.After(15 * time.Second):
		t.Fatalf("b never became the writer (a's token %d)", a.Token())
	}
}

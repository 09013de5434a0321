package workers_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
	"github.com/cohort-dev/cohort/workers"
)

const (
	session   = time.Second
	rebalance = 3 * time.Second
	nRes      = 100
)

func unitResources(n int) []workers.Resource {
	rs := make([]workers.Resource, n)
	for i := range rs {
		rs[i] = workers.Resource{Name: fmt.Sprintf("r%03d", i)}
	}
	return rs
}

// apply runs Plan to a fixed point the way the group does: members stop what
// they are not assigned, and rejoin; it returns the final ownership and how
// many rounds it took.
func apply(t *testing.T, owned map[string][]string, rs []workers.Resource) (map[string][]string, int) {
	t.Helper()
	for round := 1; round <= 5; round++ {
		plan := workers.Plan(owned, rs)
		changed := false
		for id, names := range plan {
			// Never assigned while another member claims it.
			for _, n := range names {
				for other, o := range owned {
					if other != id && contains(o, n) {
						t.Fatalf("round %d: %s assigned to %s while %s owns it", round, n, id, other)
					}
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(owned[id]) {
				changed = true
			}
		}
		owned = plan
		if !changed {
			return owned, round
		}
	}
	t.Fatal("plan did not converge in 5 rounds")
	return nil, 0
}

func contains(ns []string, n string) bool {
	for _, x := range ns {
		if x == n {
			return true
		}
	}
	return false
}

func TestPlanScaleOutIsTwoRoundsAndMinimal(t *testing.T) {
	rs := unitResources(nRes)
	owned := map[string][]string{"w0": nil}
	owned, _ = apply(t, owned, rs)
	if len(owned["w0"]) != nRes {
		t.Fatalf("single worker got %d", len(owned["w0"]))
	}
	for i := 1; i < 8; i++ {
		owned[fmt.Sprintf("w%d", i)] = nil
	}
	first := workers.Plan(owned, rs)
	if got := len(first["w0"]); got != 13 {
		t.Fatalf("first round leaves w0 with %d, want 13 (87 revoked)", got)
	}
	for i := 1; i < 8; i++ {
		if n := len(first[fmt.Sprintf("w%d", i)]); n != 0 {
			t.Fatalf("first round gave w%d %d resources while w0 still owns them", i, n)
		}
	}
	final, rounds := apply(t, first, rs)
	checkBalanced(t, final, 1)
	t.Logf("1->8 workers: %d rounds after the first", rounds)
}

func checkBalanced(t *testing.T, owned map[string][]string, maxW int) {
	t.Helper()
	lo, hi := 1<<30, 0
	seen := map[string]bool{}
	for _, ns := range owned {
		lo, hi = min(lo, len(ns)), max(hi, len(ns))
		for _, n := range ns {
			if seen[n] {
				t.Fatalf("%s assigned twice", n)
			}
			seen[n] = true
		}
	}
	if hi-lo > maxW {
		t.Fatalf("unbalanced: %d..%d", lo, hi)
	}
}

func TestPlanWeightsAndContested(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		var rs []workers.Resource
		maxW := 1
		for i := range 1 + r.IntN(40) {
			w := 1 + r.IntN(5)
			maxW = max(maxW, w)
			rs = append(rs, workers.Resource{Name: fmt.Sprintf("r%d", i), Weight: w})
		}
		owned := map[string][]string{}
		for i := range 1 + r.IntN(6) {
			owned[fmt.Sprintf("m%d", i)] = nil
		}
		for _, x := range rs { // random prior ownership, some contested
			for id := range owned {
				if r.IntN(4) == 0 {
					owned[id] = append(owned[id], x.Name)
				}
			}
		}
		for id := range owned {
			sort.Strings(owned[id])
		}
		final, _ := apply(t, owned, rs)
		loads := map[string]int{}
		total := 0
		for id, ns := range final {
			for _, n := range ns {
				for _, x := range rs {
					if x.Name == n {
						loads[id] += x.Weight
						total++
					}
				}
			}
		}
		if total != len(rs) {
			t.Fatalf("iter %d: %d of %d resources assigned", iter, total, len(rs))
		}
		lo, hi := 1<<30, 0
		for id := range final {
			lo, hi = min(lo, loads[id]), max(hi, loads[id])
		}
		if hi-lo > maxW {
			t.Fatalf("iter %d: loads %v spread %d > max weight %d", iter, loads, hi-lo, maxW)
		}
	}
}

// recorder checks from start/stop events that no resource ever runs on two
// workers at once.
type recorder struct {
	mu        sync.Mutex
	owner     map[string]string
	starts    map[string]int // starts per resource since the last snapshot
	violation string
}

func (r *recorder) start(worker, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.owner[name]; o != "" && r.violation == "" {
		r.violation = fmt.Sprintf("%s started on %s while running on %s", name, worker, o)
	}
	r.owner[name] = worker
	r.starts[name]++
}

func (r *recorder) stop(worker, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.owner[name]; o != worker && r.violation == "" {
		r.violation = fmt.Sprintf("%s stopped on %s but runs on %q", name, worker, o)
	}
	delete(r.owner, name)
}

func (r *recorder) snapshot() (map[string]string, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := make(map[string]string, len(r.owner))
	for k, v := range r.owner {
		o[k] = v
	}
	s := r.starts
	r.starts = map[string]int{}
	return o, s
}

type worker struct {
	name string
	cl   *kgo.Client
	p    *workers.Pool
}

func TestPoolScaleAndKill(t *testing.T) {
	testwait.WallClock(t, "workers joining and killed against a live coordinator")
	for _, backend := range []string{"cohort", "kfake"} {
		t.Run(backend, func(t *testing.T) {
			var addr string
			if backend == "cohort" {
				addr = membertest.StartCohort(t, nil).Addr()
			} else {
				addr = membertest.StartKfake(t)
			}
			runPool(t, addr)
		})
	}
}

func runPool(t *testing.T, addr string) {
	rec := &recorder{owner: map[string]string{}, starts: map[string]int{}}
	rs := unitResources(nRes)
	live := map[string]*worker{}
	seq := 0
	spawn := func() {
		seq++
		name := fmt.Sprintf("w%d", seq)
		cl := membertest.Client(t, addr)
		p, err := workers.Start(workers.Config{
			Member: member.Config{
				Client: cl, Group: "pool",
				SessionTimeout: session, RebalanceTimeout: rebalance, HeartbeatInterval: session / 5,
				Logger: membertest.Logger(t).With("worker", name),
			},
			Resources: func(context.Context) ([]workers.Resource, error) { return rs, nil },
			Start:     func(_ context.Context, n string, _ int32) { rec.start(name, n) },
			Stop:      func(n string) { rec.stop(name, n) },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Abandon)
		live[name] = &worker{name: name, cl: cl, p: p}
	}
	// settle waits until every resource runs on a live worker, counts are
	// balanced, and nothing changed for half a session.
	settle := func(what string) map[string]string {
		t.Helper()
		var last string
		var since time.Time
		testwait.For(t, 20*time.Second, what+": settled", func() bool {
			rec.mu.Lock()
			if v := rec.violation; v != "" {
				rec.mu.Unlock() // the workers' Stop, run at clean-up, takes it
				t.Fatal(v)
			}
			counts := map[string]int{}
			ok := len(rec.owner) == nRes
			for _, w := range rec.owner {
				if live[w] == nil {
					ok = false
				}
				counts[w]++
			}
			state := fmt.Sprint(rec.owner)
			rec.mu.Unlock()
			lo, hi := nRes, 0
			for w := range live {
				lo, hi = min(lo, counts[w]), max(hi, counts[w])
			}
			if !ok || hi-lo > 1 {
				last = ""
				return false
			}
			if state != last {
				last, since = state, time.Now()
			}
			return time.Since(since) > session/2
		})
		return nil
	}
	// check compares ownership before and after a change.
	check := func(what string, before map[string]string, t0 time.Time) map[string]string {
		t.Helper()
		settle(what)
		after, starts := rec.snapshot()
		prevCount := map[string]int{}
		moved, orphaned := 0, 0
		for n, o := range before {
			if live[o] == nil {
				orphaned++
				continue
			}
			prevCount[o]++
			if after[n] != o {
				moved++
			}
		}
		// The fewest moves any balanced result allows: the ⌈⌉ quotas go to
		// the members that own the most.
		var counts []int
		for w := range live {
			counts = append(counts, prevCount[w])
		}
		sort.Sort(sort.Reverse(sort.IntSlice(counts)))
		q, extra := nRes/len(live), nRes%len(live)
		need := 0
		for i, c := range counts {
			quota := q
			if i < extra {
				quota++
			}
			need += max(0, c-quota)
		}
		for n, k := range starts {
			if k > 1 {
				t.Fatalf("%s: %s started %d times", what, n, k)
			}
		}
		t.Logf("%s: %d workers, %d moved (minimum %d), %d from departed workers, settled in %v",
			what, len(live), moved, need, orphaned, time.Since(t0))
		if moved != need {
			t.Fatalf("%s: %d resources moved, minimum is %d", what, moved, need)
		}
		return after
	}

	spawn()
	settle("first worker")
	cur, _ := rec.snapshot()
	t0 := time.Now()
	for range 7 {
		spawn()
	}
	cur = check("1->8", cur, t0)

	r := rand.New(rand.NewPCG(7, 7))
	kinds := []string{"crash", "zombie", "close"}
	for k := 0; len(live) > 3; k++ {
		var names []string
		for n := range live {
			names = append(names, n)
		}
		sort.Strings(names)
		victim := live[names[r.IntN(len(names))]]
		kind := kinds[k%3]
		t0 := time.Now()
		switch kind {
		case "crash":
			victim.p.Abandon()
		case "zombie":
			victim.cl.Close() // it must stop its resources on its own
		case "close":
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			victim.p.Close(ctx)
			cancel()
		}
		delete(live, victim.name)
		cur = check(fmt.Sprintf("kill %s (%s)", victim.name, kind), cur, t0)
	}
}

// TestStaticTakeoverGetsANewGeneration: a second process started with a
// worker's static instance id takes over that worker's member in the group
// without a rebalance (Kafka's static membership) and is handed its
// assignment. It must not start those resources under the generation the
// first process runs them with (a fence cannot tell the two apart): it
// refuses the assignment and rejoins, and starts resources only under a new
// generation, so that a fence refuses the first process from then on.
func TestStaticTakeoverGetsANewGeneration(t *testing.T) {
	testwait.WallClock(t, "static takeover against a live coordinator, 1 s sessions")
	addr := membertest.StartCohort(t, nil).Addr()
	rs := unitResources(3)
	type run struct {
		worker, resource string
		gen              int32
	}
	started := make(chan run, 20)
	start := func(name string) {
		p, err := workers.Start(workers.Config{
			Member: member.Config{
				Client: membertest.Client(t, addr), Group: "pool", InstanceID: "worker-1",
				SessionTimeout: session, RebalanceTimeout: rebalance, HeartbeatInterval: session / 5,
				Logger: membertest.Logger(t).With("worker", name),
			},
			Resources: func(context.Context) ([]workers.Resource, error) { return rs, nil },
			Start: func(ctx context.Context, n string, token int32) {
				started <- run{name, n, token}
			},
			Stop: func(string) {},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Abandon)
	}
	start("A")
	var genA int32
	for range rs {
		r := <-started
		genA = r.gen
	}
	start("B")
	for range rs {
		select {
		case r := <-started:
			if r.worker != "B" || r.gen <= genA {
				t.Fatalf("%s started %s under generation %d; A runs its resources under %d: want B under a newer one", r.worker, r.resource, r.gen, genA)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("B did not start A's resources")
		}
	}
}

// TestRejoinFromAnyMember: Pool.Rejoin after the resource list changed makes
// the group take the new list whichever member calls it. A follower that
// rejoined with unchanged metadata was handed its assignment back without a
// rebalance (Kafka's rule), so its Rejoin did nothing; only the leader's
// worked, and the Pool API does not say which member leads. Each of the two
// workers calls it once, after its own change of the list: one of them is a
// follower.
func TestRejoinFromAnyMember(t *testing.T) {
	testwait.WallClock(t, "workers rejoining against a live coordinator")
	for _, backend := range []string{"cohort", "kfake"} {
		t.Run(backend, func(t *testing.T) {
			var addr string
			if backend == "cohort" {
				addr = membertest.StartCohort(t, nil).Addr()
			} else {
				addr = membertest.StartKfake(t)
			}
			var mu sync.Mutex
			list := unitResources(4)
			started := map[string]bool{}
			var pools []*workers.Pool
			for i := range 2 {
				p, err := workers.Start(workers.Config{
					Member: member.Config{
						Client: membertest.Client(t, addr), Group: "rejoin",
						SessionTimeout: session, RebalanceTimeout: rebalance, HeartbeatInterval: session / 5,
						Logger: membertest.Logger(t).With("worker", i),
					},
					Resources: func(context.Context) ([]workers.Resource, error) {
						mu.Lock()
						defer mu.Unlock()
						return append([]workers.Resource(nil), list...), nil
					},
					Start: func(_ context.Context, n string, _ int32) { mu.Lock(); started[n] = true; mu.Unlock() },
					Stop:  func(string) {},
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Abandon)
				pools = append(pools, p)
			}
			runs := func(n string) func() bool {
				return func() bool { mu.Lock(); defer mu.Unlock(); return started[n] }
			}
			// settled: every resource of the list runs, spread over both
			// workers, unchanged for two sessions (no rebalance under way
			// that would read the new list anyway).
			settled := func() {
				var last string
				var since time.Time
				testwait.For(t, 20*time.Second, "the pool settled", func() bool {
					a, b := pools[0].Owned(), pools[1].Owned()
					mu.Lock()
					n := len(list)
					mu.Unlock()
					state := fmt.Sprint(a, b)
					if len(a) == 0 || len(b) == 0 || len(a)+len(b) != n {
						last = ""
						return false
					}
					if state != last {
						last, since = state, time.Now()
					}
					return time.Since(since) > 2*session
				})
			}
			for i, p := range pools {
				settled()
				name := fmt.Sprintf("new%d", i)
				mu.Lock()
				list = append(list, workers.Resource{Name: name})
				mu.Unlock()
				p.Rejoin()
				testwait.For(t, 10*time.Second, fmt.Sprintf("%s running after worker %d's Rejoin", name, i), runs(name))
			}
		})
	}
}

// TestErrTellsWhyThePoolStopped: a pool the coordinator refuses for good (a
// session timeout above the coordinator's maximum) closes Done and says why
// through Err, a *member.FatalError; a pool closed by its caller has no error.
func TestErrTellsWhyThePoolStopped(t *testing.T) {
	addr := membertest.StartCohort(t, nil).Addr()
	p, err := workers.Start(workers.Config{
		Member: member.Config{
			Client: membertest.Client(t, addr), Group: "refused",
			SessionTimeout: 31 * time.Minute, RebalanceTimeout: rebalance, HeartbeatInterval: session / 5,
			Logger: membertest.Logger(t),
		},
		Resources: func(context.Context) ([]workers.Resource, error) { return unitResources(1), nil },
		Start:     func(context.Context, string, int32) {},
		Stop:      func(string) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Abandon)
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("a refused pool still runs")
	}
	var fe *member.FatalError
	if !errors.As(p.Err(), &fe) {
		t.Fatalf("Err %v, want a *member.FatalError", p.Err())
	}
}

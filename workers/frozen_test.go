package workers_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testchild"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
	"github.com/cohort-dev/cohort/workers"
)

// The frozen-worker test runs worker A in a child process (this test binary,
// re-executed with frozenChildEnv set) so that it can be stopped with SIGSTOP.
const (
	frozenChildEnv  = "COHORT_TEST_WORKERS_FROZEN" // the check mode: "lease" or "ctx"
	frozenAddrEnv   = "COHORT_TEST_WORKERS_ADDR"
	frozenSinkEnv   = "COHORT_TEST_WORKERS_SINK"
	frozenGroupEnv  = "COHORT_TEST_WORKERS_GROUP"
	frozenSession   = time.Second
	frozenResources = 10
	unitEvery       = 20 * time.Millisecond
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(frozenChildEnv); mode != "" {
		os.Exit(runFrozenChild(mode))
	}
	os.Exit(m.Run())
}

func frozenConfig(group string) member.Config {
	return member.Config{Group: group, SessionTimeout: frozenSession, RebalanceTimeout: 2 * frozenSession,
		HeartbeatInterval: frozenSession / 5}
}

// unitLoop is a resource's work: every unitEvery, it checks whether it may
// still work (mode "lease": Lease.Check; mode "ctx": only the context, as a
// loop did before leases existed) and writes one unit to the sink. It calls
// end once, when it stops: refused, stopped, or told by the sink that its
// token is stale.
func unitLoop(ctx context.Context, mode string, post func(workers.Token, time.Time) (bool, error),
	end func(tok workers.Token, checked time.Time, why string)) {
	lease := workers.LeaseOf(ctx)
	tok := lease.Token()
	tick := time.NewTicker(unitEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			end(tok, time.Now(), "stopped")
			return
		case <-tick.C:
		}
		checked := time.Now()
		err := context.Cause(ctx)
		if mode == "lease" {
			err = lease.Check()
		}
		if err != nil {
			end(tok, checked, "refused: "+err.Error())
			return
		}
		ok, err := post(tok, checked)
		if err != nil {
			continue // the sink is unreachable: try again
		}
		if !ok {
			end(tok, checked, "stale")
			return
		}
	}
}

// runFrozenChild is worker A: it runs the pool and prints "START res gen"
// when a resource starts and "END res gen checked-unix-ns why" when its loop
// stops.
func runFrozenChild(mode string) int {
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	sink := os.Getenv(frozenSinkEnv)
	hc := &http.Client{Timeout: 2 * time.Second}
	post := func(tok workers.Token, checked time.Time) (bool, error) {
		q := url.Values{"worker": {"A"}, "res": {tok.Resource}, "gen": {strconv.Itoa(int(tok.Generation))},
			"checked": {strconv.FormatInt(checked.UnixNano(), 10)}}
		resp, err := hc.Post(sink+"/unit?"+q.Encode(), "", nil)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
	end := func(tok workers.Token, checked time.Time, why string) {
		say("END %s %d %d %s", tok.Resource, tok.Generation, checked.UnixNano(), why)
	}
	mc := frozenConfig(os.Getenv(frozenGroupEnv))
	mc.Brokers = []string{os.Getenv(frozenAddrEnv)}
	mc.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("worker", "A")
	_, err := workers.Start(workers.Config{
		Member:    mc,
		Resources: func(context.Context) ([]workers.Resource, error) { return unitResources(frozenResources), nil },
		Start: func(ctx context.Context, name string, token int32) {
			say("START %s %d", name, token)
			go unitLoop(ctx, mode, post, end)
		},
		Stop: func(string) {},
	})
	if err != nil {
		say("ERR %v", err)
		return 1
	}
	select {} // until the test kills it
}

// unit is one write that reached the sink.
type unit struct {
	worker   string
	tok      workers.Token
	checked  time.Time // when the worker checked before writing (its wall clock)
	arrived  time.Time
	accepted bool
}

// sink is the store the resources write to: it admits a unit only through a
// workers.Fence, and records every attempt.
type sink struct {
	fence workers.Fence
	mu    sync.Mutex
	units []unit
}

func (s *sink) write(worker string, tok workers.Token, checked time.Time) bool {
	u := unit{worker: worker, tok: tok, checked: checked}
	err := s.fence.Do(tok, func() error {
		u.arrived, u.accepted = time.Now(), true
		s.record(u)
		return nil
	})
	if err != nil {
		u.arrived = time.Now()
		s.record(u)
	}
	return err == nil
}

func (s *sink) record(u unit) {
	s.mu.Lock()
	s.units = append(s.units, u)
	s.mu.Unlock()
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	gen, err1 := strconv.Atoi(q.Get("gen"))
	ns, err2 := strconv.ParseInt(q.Get("checked"), 10, 64)
	if err1 != nil || err2 != nil || q.Get("res") == "" {
		http.Error(w, "bad unit", http.StatusBadRequest)
		return
	}
	if !s.write(q.Get("worker"), workers.Token{Resource: q.Get("res"), Generation: int32(gen)}, time.Unix(0, ns)) {
		http.Error(w, "stale token", http.StatusConflict)
	}
}

// firstAccepted returns, per resource, the first unit of worker accepted with
// a generation above floor[resource] (floor nil: any).
func (s *sink) firstAccepted(worker string, floor map[string]int32) map[string]unit {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]unit{}
	for _, u := range s.units {
		if _, seen := out[u.tok.Resource]; seen || !u.accepted || u.worker != worker {
			continue
		}
		if f, ok := floor[u.tok.Resource]; floor == nil || ok && u.tok.Generation > f {
			out[u.tok.Resource] = u
		}
	}
	return out
}

// childLog collects worker A's START and END lines.
type childLog struct {
	mu     sync.Mutex
	starts map[string]int32 // resource -> latest token
	ends   map[workers.Token]childEnd
}

type childEnd struct {
	checked time.Time
	why     string
}

func (c *childLog) read(t *testing.T, sc *bufio.Scanner) {
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 5)
		c.mu.Lock()
		switch {
		case f[0] == "START" && len(f) == 3:
			gen, _ := strconv.Atoi(f[2])
			c.starts[f[1]] = int32(gen)
		case f[0] == "END" && len(f) == 5:
			gen, _ := strconv.Atoi(f[2])
			ns, _ := strconv.ParseInt(f[3], 10, 64)
			c.ends[workers.Token{Resource: f[1], Generation: int32(gen)}] = childEnd{time.Unix(0, ns), f[4]}
		default:
			t.Logf("child A: %s", sc.Text())
		}
		c.mu.Unlock()
	}
}

// TestFrozenWorker: worker A (a child process) runs 10 resources whose loops
// write a unit every 20 ms to a fenced sink. A is stopped with SIGSTOP past
// its 1 s session; worker B (in this process) takes the 10 resources with a
// newer token and writes; then A is resumed. In both modes the fence admits
// no unit of A's old tokens after B's first unit. In mode "lease" (the loops
// call Lease.Check before each unit) no loop of A passes its check after the
// resume: the only units A can still send are ones it checked before it was
// frozen, and the fence refuses them. Mode "ctx" (the loops watch only their
// context, as before leases) shows what the fence alone has to catch.
func TestFrozenWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("wall clock: SIGSTOP of a child process past a 1 s session")
	}
	addr := membertest.StartCohort(t, nil).Addr()
	for _, mode := range []string{"lease", "ctx"} {
		t.Run(mode, func(t *testing.T) { runFrozen(t, addr, mode) })
	}
}

func runFrozen(t *testing.T, addr, mode string) {
	group := "frozen-" + mode
	s := &sink{}
	srv := httptest.NewServer(s) // 127.0.0.1
	defer srv.Close()

	a, out := testchild.Start(t, frozenChildEnv+"="+mode, frozenAddrEnv+"="+addr, frozenSinkEnv+"="+srv.URL,
		frozenGroupEnv+"="+group)
	cl := &childLog{starts: map[string]int32{}, ends: map[workers.Token]childEnd{}}
	go cl.read(t, out)

	testwait.For(t, 30*time.Second, "A writing all resources", func() bool {
		return len(s.firstAccepted("A", nil)) == frozenResources
	})
	cl.mu.Lock()
	old := make(map[string]int32, len(cl.starts))
	for r, g := range cl.starts {
		old[r] = g
	}
	cl.mu.Unlock()
	if len(old) != frozenResources {
		t.Fatalf("A started %d resources", len(old))
	}

	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "A stopped", a.Stopped)
	stoppedAt := time.Now()

	var bmu sync.Mutex
	bTok := map[string]int32{}
	mc := frozenConfig(group)
	mc.Client = membertest.Client(t, addr)
	mc.Logger = membertest.Logger(t).With("worker", "B")
	b, err := workers.Start(workers.Config{
		Member:    mc,
		Resources: func(context.Context) ([]workers.Resource, error) { return unitResources(frozenResources), nil },
		Start: func(ctx context.Context, name string, token int32) {
			bmu.Lock()
			bTok[name] = token
			bmu.Unlock()
			post := func(tok workers.Token, checked time.Time) (bool, error) { return s.write("B", tok, checked), nil }
			go unitLoop(ctx, "lease", post, func(workers.Token, time.Time, string) {})
		},
		Stop: func(string) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Abandon()
	testwait.For(t, 30*time.Second, "B writing all resources", func() bool {
		return len(s.firstAccepted("B", old)) == frozenResources
	})
	bFirst := s.firstAccepted("B", old)
	resumeAt := time.Now()
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "A's old loops ending", func() bool {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		for r, g := range old {
			if _, ok := cl.ends[workers.Token{Resource: r, Generation: g}]; !ok {
				return false
			}
		}
		return true
	})
	endedIn := time.Since(resumeAt)
	a.Kill()

	s.mu.Lock()
	units := append([]unit(nil), s.units...)
	s.mu.Unlock()
	var afterResume, checkedAfterResume, rejected int
	for _, u := range units {
		if u.worker != "A" || u.tok.Generation > old[u.tok.Resource] {
			continue // B, or A with a token from after its resume
		}
		bu := bFirst[u.tok.Resource]
		if u.accepted && u.arrived.After(bu.arrived) {
			t.Errorf("fence admitted A's unit %v after B's first unit %v", u.tok, bu.tok)
		}
		if u.arrived.After(resumeAt) {
			afterResume++
			if !u.checked.Before(resumeAt) {
				checkedAfterResume++
			}
			if !u.accepted {
				rejected++
			}
		}
	}
	reasons := map[string]int{}
	cl.mu.Lock()
	for r, g := range old {
		why := cl.ends[workers.Token{Resource: r, Generation: g}].why
		switch {
		case strings.Contains(why, "lease expired"):
			why = "lease expired"
		case strings.HasPrefix(why, "refused"):
			why = "refused: stopped"
		}
		reasons[why]++
	}
	cl.mu.Unlock()
	for r, g := range old {
		if bTok[r] <= g {
			t.Errorf("%s: B's token %d is not newer than A's %d", r, bTok[r], g)
		}
	}
	t.Logf("mode %s: A frozen %v; B wrote all %d resources with newer tokens; after SIGCONT A's old loops ended within %v: %v; "+
		"units A sent with an old token after the resume: %d (checked after the resume: %d), rejected by the fence: %d",
		mode, resumeAt.Sub(stoppedAt).Round(time.Millisecond), frozenResources, endedIn.Round(time.Millisecond), reasons,
		afterResume, checkedAfterResume, rejected)
	if mode == "lease" && checkedAfterResume > 0 {
		t.Errorf("%d units of A passed their validity check after the resume", checkedAfterResume)
	}
}

package clients

// Chaos on a bare node: cohort runs as a child process on its disk store,
// the stock clients' workers (examples/workdist) talk to it directly, with
// nothing in front, and the process is SIGKILLed and started again on the
// same address and data directory at the moment that hurts most:
//
//   - TestNodeRestartMidRebalance: a classic group of each client has two
//     settled members; a third joins and, while the group rebalances
//     (DescribeGroups says PreparingRebalance or CompletingRebalance), the
//     node is killed and restarted.
//   - TestKIP848NodeRestart: a consumer-protocol (KIP-848) group of
//     franz-go members; a third joins and, while the members reconcile
//     (ConsumerGroupDescribe says the group is not Stable), the node is
//     killed and restarted.
//   - TestKIP848UpgradeNodeRestart: a classic franz-go group upgraded to the
//     consumer protocol by a next-gen member joining, the node killed while
//     it converts, then downgraded by that member leaving, the node killed
//     again while it converts back.
//
// Afterwards the group must settle again (every worker a member, the
// assignments disjoint and covering the topic, each worker's printed
// ownership what the coordinator says it has) within restartRecover of the
// restart; offsets committed before the members joined must be unchanged;
// no partition may have had two owners at any moment (checkExclusive, on
// the times the workers print, and for kcat, which prints none, the times
// the test read its lines); and the node must have logged no
// panic.

import (
	"context"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/internal/testport"
	"github.com/cohort-dev/cohort/internal/testwait"
)

const (
	// restartRecover bounds the time from the restarted node's report
	// that it is ready (READY=1, clients/testbed) to a settled group. The clients retry a lost
	// coordinator with backoffs of up to a few seconds, then may need a
	// session timeout (bareSession) to drop a member cohort no longer
	// knows; measured recoveries are in the test log.
	restartRecover = 30 * time.Second
	// restartDown is how long the node stays down: long enough for
	// kafkajs to give up its retries of the lost broker (its consumer
	// crashes and restarts as a new member), as a real restart may take.
	restartDown = 2 * time.Second
	// restartTimeout bounds each scenario.
	restartTimeout = 60 * time.Second
	// outageRepeats is how often one error line may appear in one
	// worker's output until the group has settled after the restart:
	// while the node is down the clients report the lost connections per
	// partition, per connection and per retry (confluent-kafka-go's
	// "1/1 brokers are down" up to 15 times in the 2 s outage), so more
	// than maxRepeats; a client stuck in a loop would print thousands.
	// Once the group has settled again, maxRepeats applies.
	outageRepeats = 40
)

// procLog keeps the lines of a cohort process (warn level and above) and
// shows them in the test log.
type procLog struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
	part  string
}

func (l *procLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part += string(p)
	for {
		line, rest, ok := strings.Cut(l.part, "\n")
		if !ok {
			break
		}
		l.part = rest
		l.lines = append(l.lines, line)
		l.t.Log("cohort: " + line)
	}
	return len(p), nil
}

// panics returns the lines that tell of a panic in the node.
func (l *procLog) panics() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, "panic") || strings.Contains(line, "BUG") {
			out = append(out, line)
		}
	}
	return out
}

// startProcessTarget starts a cohort child process on a fresh data
// directory with the catalog topics of the KIP-848 scenarios, as a
// nextTarget (its proc set, its bare nil).
func startProcessTarget(t *testing.T) (*nextTarget, *procLog) {
	t.Helper()
	testwait.WallClock(t, "stock Kafka clients against a cohort process")
	log := &procLog{t: t}
	co := &testbed.Cohort{Bin: testbed.BuildCohort(t), Dir: t.TempDir(), Addr: testport.Reserve(t), Log: log,
		Args: []string{"--consumer-session-timeout", nextSession.String(), "--consumer-heartbeat-interval", nextHeartbeat.String()}}
	co.Start(t)
	t.Cleanup(co.Kill)
	tg := &nextTarget{name: "process", addr: co.Addr, proc: co}
	cl, err := kgo.NewClient(kgo.SeedBrokers(co.Addr), kgo.ClientID("restart-admin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	tg.cl, tg.adm = cl, kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, parts := range map[string]int32{bareTopic: barePartitions, ledgerTopic: 2} {
		resp, err := tg.adm.CreateTopic(ctx, parts, 1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			// The node's first request: say how the process fares and
			// what holds its port.
			t.Fatalf("create topic %s: %v; %s", name, err, co.Explain())
		}
	}
	return tg, log
}

// newProcessRun is newNextRun on a cohort process.
func newProcessRun(t *testing.T, group string) (*nextRun, *procLog) {
	tg, log := startProcessTarget(t)
	goWorkerDir(t) // built before the scenario's clock starts
	ctx, cancel := context.WithTimeout(context.Background(), restartTimeout)
	t.Cleanup(cancel)
	return &nextRun{t: t, ctx: ctx, tg: tg, group: group, killed: map[*worker]int64{}, noisy: map[*worker]bool{}, begin: time.Now()}, log
}

// killWhen polls state every 5 ms and SIGKILLs the node as soon as it
// returns true (or, if that never happens within 10 s, anyway, saying so),
// then, restartDown later, starts it again on the same address and data
// directory.
func (r *nextRun) killWhen(what string, state func() bool) time.Time {
	r.t.Helper()
	seen := false
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if state() {
			seen = true
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.tg.proc.Kill()
	if seen {
		r.step("node SIGKILLed " + what)
	} else {
		r.step("node SIGKILLed, but never saw it " + what)
	}
	time.Sleep(restartDown) // the outage itself, not a wait for a condition
	r.tg.proc.Start(r.t)
	r.step("node restarted")
	return time.Now()
}

// surviving is c able to outlive a node that is down for a moment: kcat
// exits when it has lost every broker connection unless told -E ("do not
// exit on non-fatal error"); the other clients retry by themselves.
func surviving(c workdistClient) workdistClient {
	if c.name != "kcat" {
		return c
	}
	cmd := c.command
	c.command = func(t *testing.T, addr, group, clientID string) *exec.Cmd {
		x := cmd(t, addr, group, clientID)
		x.Args = slices.Insert(x.Args, 1, "-E")
		return x
	}
	return c
}

// recovered waits for settle, which settles the group, checks that it
// settled within restartRecover of the restart, and returns how often each
// worker has printed each error line so far (restartFinish compares).
func (r *nextRun) recovered(restarted time.Time, settle func()) map[*worker]map[string]int {
	r.t.Helper()
	settle()
	took := time.Since(restarted)
	r.step("the group settled after the restart")
	if took > restartRecover {
		r.t.Errorf("the group settled %v after the restart, want at most %v", took.Round(time.Millisecond), restartRecover)
	}
	out := map[*worker]map[string]int{}
	for _, w := range r.workers {
		w.mu.Lock()
		out[w] = maps.Clone(w.errs)
		w.mu.Unlock()
	}
	return out
}

// restartFinish stops the workers and runs the checks of finish that apply
// to every client here: exclusive ownership over time (checkExclusive; the
// workers time their lines, the test kcat's); no error line printed more than outageRepeats times
// until the group settled after the restart (at), nor more than maxRepeats
// times after; no panic of the node.
func (r *nextRun) restartFinish(log *procLog, at map[*worker]map[string]int) {
	r.t.Helper()
	for _, w := range r.workers {
		w.p.Close()
	}
	if err := checkExclusive(r.workers, r.killed, bareSession, bareSession/3); err != nil {
		r.t.Error(err)
	}
	for _, w := range r.workers {
		w.mu.Lock()
		for line, n := range w.errs {
			before := at[w][line]
			r.t.Logf("%s error line ×%d (×%d after the group settled again): %s", w.clientID, n, n-before, line)
			if before > outageRepeats {
				r.t.Errorf("%s repeated an error %d times until the group settled after the restart (at most %d allowed): %s",
					w.clientID, before, outageRepeats, line)
			}
			if n-before > maxRepeats {
				r.t.Errorf("%s repeated an error %d times after the group settled again (at most %d allowed): %s",
					w.clientID, n-before, maxRepeats, line)
			}
		}
		w.mu.Unlock()
	}
	if p := log.panics(); len(p) > 0 {
		r.t.Errorf("cohort logged %d panics, first: %s", len(p), p[0])
	}
	r.step("done")
}

// TestNodeRestartMidRebalance: see the top of this file.
func TestNodeRestartMidRebalance(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own node
	for _, c := range workdistClients {
		c := surviving(c)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, log := newProcessRun(t, "restart-"+c.name)
			r.commitLedger()
			w1, w2 := r.start(c, c.name+"-1"), r.start(c, c.name+"-2")
			r.settleClassic(w1, w2)
			r.step("two members settled")
			w3 := r.start(c, c.name+"-3")
			restarted := r.killWhen("while the group rebalances", func() bool {
				described, err := r.tg.adm.DescribeGroups(r.ctx, r.group)
				if err != nil {
					return false
				}
				s := described[r.group].State
				return s == "PreparingRebalance" || s == "CompletingRebalance"
			})
			errs := r.recovered(restarted, func() { r.settleClassic(w1, w2, w3) })
			r.checkLedger("after the restart")
			r.restartFinish(log, errs)
		})
	}
}

// TestKIP848NodeRestart: see the top of this file.
func TestKIP848NodeRestart(t *testing.T) {
	t.Parallel() // with the other parallel tests: its own node
	r, log := newProcessRun(t, "kip848-restart")
	r.commitLedger()
	next := franzgoNext(true)
	w1, w2 := r.start(next, "next-1"), r.start(next, "next-2")
	g := r.settleConsumer(w1, w2)
	r.step("two members settled")
	w3 := r.start(next, "next-3")
	restarted := r.killWhen("while the members reconcile", func() bool {
		d, err := r.describe()
		return err == nil && d.Epoch > g.Epoch && d.State != "Stable"
	})
	errs := r.recovered(restarted, func() { r.settleConsumer(w1, w2, w3) })
	r.wantType("consumer")
	r.checkLedger("after the restart")
	r.restartFinish(log, errs)
}

// TestKIP848UpgradeNodeRestart: two classic franz-go members settle; a
// consumer-protocol member joins, and while the group converts (ListGroups
// says consumer, ConsumerGroupDescribe that it is not Stable yet) the node
// is SIGKILLed and restarted. The mixed group must settle (the classic
// members of type 0, the next-gen one of type 1, every member at the group
// epoch with its target); then the next-gen member stops, and while the
// group turns classic again the node is killed and restarted once more: the
// two classic members must settle as a classic group. The ledger offsets
// stay, and no partition has two owners at any moment.
func TestKIP848UpgradeNodeRestart(t *testing.T) {
	t.Parallel() // with the other parallel tests: its own node
	r, log := newProcessRun(t, "kip848-upgrade-restart")
	r.commitLedger()
	classic := franzgoNext(false)
	c1, c2 := r.start(classic, "classic-1"), r.start(classic, "classic-2")
	r.settleClassic(c1, c2)
	r.step("two classic members settled")
	n3 := r.start(franzgoNext(true), "next-3")
	restarted := r.killWhen("while the group upgrades", func() bool {
		d, err := r.describe()
		return err == nil && d.State != "Stable"
	})
	r.recovered(restarted, func() { r.settleConsumer(c1, c2, n3) })
	r.wantType("consumer")
	g, err := r.describe()
	if err != nil {
		t.Fatal(err)
	}
	checkMemberTypes(t, g)
	r.checkLedger("after the upgrade and a restart")

	stopped := make(chan struct{})
	go func() { defer close(stopped); n3.p.Close() }() // SIGTERM: it leaves
	restarted = r.killWhen("while the group downgrades", func() bool {
		listed := r.groupType()
		return listed == "classic" || n3.printedStopped()
	})
	<-stopped
	errs := r.recovered(restarted, func() { r.settleClassic(c1, c2) })
	r.wantType("classic")
	r.checkLedger("after the downgrade and a restart")
	r.restartFinish(log, errs)
}

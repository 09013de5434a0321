package clients

// Issue 14, item 1, "How it must be shown": the bare-cohort mode of the
// test bed. Every client of the bed runs a group over a catalog topic
// directly against a cohort node (testbed.Bare: no router, no data
// cluster), each member a real child process: the work-distribution
// examples of examples/workdist (franz-go, sarama, kafka-go,
// confluent-kafka-go, kafkajs) and `kcat -G`. Per client:
//
//   - two members start; once their generation is settled (every member
//     that joined it synced) and covers the topic, the group idles for
//     idleWindow, in which no new generation may begin and every client
//     fetches each partition it owns at most about once per fetch max wait;
//   - a third member joins; one of the first two is SIGKILLed (cohort
//     evicts it when its session expires); the other gets SIGTERM and
//     leaves (LeaveGroup); the last one is alone with every partition;
//   - at each of these steps each running member's printed ownership must
//     equal what cohort gave it in that generation;
//   - then: no partition was given to two members in one generation, every
//     settled eager generation gave out every partition, no commit of an
//     ended generation was acknowledged, OffsetFetch answers reflect the
//     commits, no process repeated an error line, and cohort logged no
//     warning.
//
// The bed's node answers the requests of the clients as it would those of
// any client; its Tap feeds the journal and counts the Fetch requests.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/internal/testbin"
)

const (
	bareTopic      = "jobs"
	barePartitions = 6
	// bareSession is the members' session timeout: the SIGKILLed member
	// is evicted that long after its last heartbeat.
	bareSession = 6 * time.Second
	// bareFetchWait is the clients' fetch max wait: cohort holds each
	// Fetch that long, as a broker does on an empty partition.
	bareFetchWait = 500 * time.Millisecond
	// idleWindow is how long the settled group is watched idling.
	idleWindow = 3 * time.Second
	// maxIdleFetches bounds the Fetches of one partition by one client in
	// idleWindow: one per bareFetchWait, and a few for the window's edges
	// (checkIdle counts with the max wait the client asked).
	maxIdleFetches = int(idleWindow/bareFetchWait) + 3
	// maxRepeats is how often one error line (see errorLine) may appear in
	// one process's output.
	maxRepeats = 3
	// bareTimeout bounds each client's scenario.
	bareTimeout = 90 * time.Second
)

// workdistClient is one client library of the bare bed.
type workdistClient struct {
	name string
	// command is the worker process of one member.
	command func(t *testing.T, addr, group, clientID string) *exec.Cmd
	// commits: the worker commits (every example does; kcat commits
	// only consumed offsets and consumes nothing here).
	commits bool
	// closeHang, if set, is a known way the worker's library hangs in its
	// close (knownHang).
	closeHang *knownHang
	// leaves, if set, tells from the worker's output when it sent its
	// leave, so that a commit refused UNKNOWN_MEMBER_ID can be told to be
	// its own doing or the coordinator's fault (nextRun.checkRefusedCommits).
	leaves *leaveLines
}

// leaveLines are substrings of a worker's output lines (on one stream, so
// in the order printed): left, of the line its library prints when it sends
// its leave; refused, of the line the worker prints when a commit of its is
// refused UNKNOWN_MEMBER_ID.
type leaveLines struct {
	left, refused string
}

var workdistClients = []workdistClient{
	{name: "franzgo", command: goWorker("franzgo"), commits: true},
	{name: "sarama", command: goWorker("sarama"), commits: true},
	{name: "kafkago", command: goWorker("kafkago"), commits: true},
	{name: "confluent", command: goWorker("confluent"), commits: true},
	{name: "kafkajs", command: kafkajsWorker, commits: true},
	{name: "kafkapython", command: kafkaPythonWorker, commits: true},
	{name: "kcat", command: kcatWorker},
}

// goExamples are the Go programs of examples/workdist.
var goExamples = []string{"franzgo", "sarama", "kafkago", "confluent"}

// goWorkerDir builds the Go examples of examples/workdist, once per test
// binary, and returns the directory of their binaries. A scenario with a
// time bound calls it before its clock starts: on a cold build cache the
// build alone took 97 s on two busy cores, more than a scenario's bound.
func goWorkerDir(t *testing.T) string {
	t.Helper()
	var pkgs []string
	for _, ex := range goExamples {
		pkgs = append(pkgs, "github.com/cohort-dev/cohort/examples/workdist/"+ex)
	}
	return testbin.Build(t, pkgs...)
}

// goWorker runs the example examples/workdist/<name> (see goWorkerDir).
func goWorker(name string) func(t *testing.T, addr, group, clientID string) *exec.Cmd {
	return func(t *testing.T, addr, group, clientID string) *exec.Cmd {
		t.Helper()
		return exec.Command(filepath.Join(goWorkerDir(t), name), "-bootstrap", addr, "-group", group, "-topic", bareTopic,
			"-client-id", clientID, "-session-timeout", bareSession.String(), "-fetch-max-wait", bareFetchWait.String())
	}
}

// kafkajsWorker runs examples/workdist/kafkajs/worker.js with the kafkajs
// of clients/kafkajs (NODE_PATH).
func kafkajsWorker(t *testing.T, addr, group, clientID string) *exec.Cmd {
	needKafkajs(t)
	modules, err := filepath.Abs("kafkajs/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "../examples/workdist/kafkajs/worker.js", "--bootstrap", addr, "--group", group,
		"--topic", bareTopic, "--client-id", clientID,
		"--session-timeout-ms", ms(bareSession), "--fetch-max-wait-ms", ms(bareFetchWait))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	return cmd
}

// kafkaPythonWorker runs examples/workdist/kafkapython/worker.py with
// kafka-python (Debian's python3-kafka).
func kafkaPythonWorker(t *testing.T, addr, group, clientID string) *exec.Cmd {
	needKafkaPython(t)
	return exec.Command(kafkaPythonInterpreter, "../examples/workdist/kafkapython/worker.py", "--bootstrap", addr, "--group", group,
		"--topic", bareTopic, "--client-id", clientID,
		"--session-timeout-ms", ms(bareSession), "--fetch-max-wait-ms", ms(bareFetchWait))
}

// kcatWorker runs `kcat -G`: librdkafka's group consumer, printing its
// assignments on stderr.
func kcatWorker(t *testing.T, addr, group, clientID string) *exec.Cmd {
	needKcat(t)
	return exec.Command("kcat", "-b", addr, "-G", group,
		"-X", "client.id="+clientID,
		"-X", "session.timeout.ms="+ms(bareSession),
		"-X", "fetch.wait.max.ms="+ms(bareFetchWait),
		bareTopic)
}

// ownership is one change of ownership a worker printed.
type ownership struct {
	kind   string // "assigned", "revoked" or "lost"
	parts  []int32
	member string // "" if the library does not tell
	at     int64  // when the worker's callback ran (Unix ns), or for kcat's lines when the test read them
	// late is how much later than the callback at may be (ns): 0 for the
	// workers' own at=, receiptTolerance for a line the test stamped.
	late int64
}

// receiptTolerance is how long after kcat printed a rebalance line the
// test may read it: kcat prints no time, so the test stamps its lines as
// it reads them, and checkExclusive takes a kcat release to have happened
// up to this much before its stamp. The delay is the pipe and the
// scheduling of the test's reader goroutine; a second is far more than a
// loaded machine takes, and an overlap shorter than it involving kcat goes
// unnoticed.
const receiptTolerance = time.Second

// kcatRebalance is kcat's line (stderr) after each rebalance, e.g.
// "% Group g rebalanced (memberid m-1): assigned: jobs [0], jobs [3]".
var kcatRebalance = regexp.MustCompile(`^% Group \S+ rebalanced \(memberid (\S*)\): (assigned|revoked): (.*)$`)

var kcatPartition = regexp.MustCompile(`\[(\d+)\]`)

// parseOwnership reads a worker's line: the examples' stdout lines
// "assigned|revoked|lost <p,p,..|none> [member=<id>] [key=value ...]"
// (examples/workdist) and kcat's rebalance lines.
func parseOwnership(stderr bool, line string) (ownership, bool) {
	var o ownership
	var parts []string
	if m := kcatRebalance.FindStringSubmatch(line); stderr && m != nil {
		o.member, o.kind = m[1], m[2]
		for _, p := range kcatPartition.FindAllStringSubmatch(m[3], -1) {
			parts = append(parts, p[1])
		}
	} else {
		f := strings.Fields(line)
		if stderr || len(f) < 2 || !slices.Contains([]string{"assigned", "revoked", "lost"}, f[0]) {
			return o, false
		}
		o.kind = f[0]
		if f[1] != "none" {
			parts = strings.Split(f[1], ",")
		}
		for _, kv := range f[2:] {
			if v, ok := strings.CutPrefix(kv, "member="); ok {
				o.member = v
			}
			if v, ok := strings.CutPrefix(kv, "at="); ok {
				o.at, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return o, false
		}
		o.parts = append(o.parts, int32(n))
	}
	return o, true
}

// librdkafkaLog is a librdkafka log line ("%<level>|<time>|<facility>|...").
var librdkafkaLog = regexp.MustCompile(`^%(\d)\|`)

// errorLine reports whether a worker's output line is an error or a
// warning: a line the examples write as "error: ...", a warning or error of
// franz-go's logger ("[WARN]", "[ERROR]"), of librdkafka (log levels 0-4,
// "%4|..."; confluent and kcat) or of kafkajs (JSON "level":"WARN" or
// "ERROR"), kafka-python's (its worker logs "[WARN]" and "[ERROR]"), or
// kcat's "% ERROR". sarama and kafka-go report errors only through the
// examples' "error:" lines. Not counted: the answers REBALANCE_IN_PROGRESS,
// which is how the protocol tells members to rejoin and which kafkajs logs
// as an error (once per heartbeat, and a warning from its runner) and
// kafka-python as a warning (once per rebalance).
func errorLine(line string) bool {
	if strings.Contains(line, "The group is rebalancing") || // kafkajs's REBALANCE_IN_PROGRESS
		strings.Contains(line, "Heartbeat failed for group") && strings.HasSuffix(line, "because it is rebalancing") { // kafka-python's
		return false
	}
	if m := librdkafkaLog.FindStringSubmatch(line); m != nil {
		return m[1] <= "4"
	}
	for _, p := range []string{"error:", "[WARN]", "[ERROR]", "% ERROR", `{"level":"WARN"`, `{"level":"ERROR"`} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// volatile is what differs between repetitions of one error: numbers,
// member ids, times.
var volatile = regexp.MustCompile(`[0-9a-fA-F-]{8,}|\d+`)

// worker is one member process and what it printed.
type worker struct {
	clientID string
	p        *procMember

	mu      sync.Mutex
	owned   map[int32]bool
	events  []ownership    // every change of ownership it printed, in order
	member  string         // the member id it last printed, if any
	errs    map[string]int // error line (volatile parts masked) → count
	errRaw  []string       // the error lines as printed, in order
	stopped bool           // it printed "stopped"
	// left: it printed c.leaves.left; refusedInGroup: the lines
	// c.leaves.refused it printed before that.
	left           bool
	refusedInGroup []string
}

// printedStopped reports whether the worker has printed "stopped"; the
// output reader sets it, so it is read under the worker's lock.
func (w *worker) printedStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

func startWorker(t *testing.T, c workdistClient, addr, group, clientID string) *worker {
	t.Helper()
	w := &worker{clientID: clientID, owned: map[int32]bool{}, errs: map[string]int{}}
	w.p = startChildHanging(t, c.name+" "+clientID, c.command(t, addr, group, clientID), c.closeHang, func(stderr bool, line string) {
		stream := ""
		if stderr {
			stream = " stderr"
		}
		t.Logf("%s%s: %s", clientID, stream, line)
		w.mu.Lock()
		defer w.mu.Unlock()
		if line == "stopped" && !stderr {
			w.stopped = true
		}
		if l := c.leaves; l != nil && stderr {
			switch {
			case strings.Contains(line, l.left):
				w.left = true
			case !w.left && strings.Contains(line, l.refused):
				w.refusedInGroup = append(w.refusedInGroup, line)
			}
		}
		if errorLine(line) {
			w.errs[volatile.ReplaceAllString(line, "#")]++
			w.errRaw = append(w.errRaw, line)
		}
		o, ok := parseOwnership(stderr, line)
		if !ok {
			return
		}
		if o.at == 0 && stderr { // kcat's, untimed: stamped as read
			o.at, o.late = time.Now().UnixNano(), int64(receiptTolerance)
		}
		w.events = append(w.events, o)
		if o.member != "" {
			w.member = o.member
		}
		for _, p := range o.parts {
			w.owned[p] = o.kind == "assigned"
		}
	})
	t.Cleanup(w.p.Kill)
	return w
}

// printed returns the partitions the worker says it owns and the member id
// it printed last.
func (w *worker) printed() ([]int32, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int32
	for p, own := range w.owned {
		if own {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, w.member
}

// bareGroup is one client's group on a bare node.
type bareGroup struct {
	t     *testing.T
	ctx   context.Context
	b     *testbed.Bare
	group string
	all   []testbed.TP
}

// settle waits for a generation later than after that is settled, has
// exactly the workers as members and gives out every partition, then until
// each worker's printed ownership is what cohort gave it there. It returns
// the generation.
func (g *bareGroup) settle(after int32, workers ...*worker) int32 {
	g.t.Helper()
	j := g.b.Journal
	var gen int32
	want := make([]string, len(workers))
	err := testbed.WaitFor(g.ctx, fmt.Sprintf("a settled generation > %d of %d members covering the topic", after, len(workers)), func() bool {
		for i, w := range workers {
			want[i] = j.MemberOf(g.group, w.clientID)
		}
		slices.Sort(want)
		for _, w := range workers {
			select {
			case <-w.p.done:
				g.t.Fatalf("%s exited: %v", w.clientID, w.p.err)
			default:
			}
		}
		gen = j.LastGeneration(g.group)
		return gen > after && j.Settled(g.group, gen) && slices.Equal(j.Members(g.group, gen), want) && j.Covers(g.group, gen, g.all)
	})
	if err != nil {
		g.t.Fatalf("%v (generations %v, last %d: members %v, assignment %v; want members %v)", err, j.Generations(g.group), gen,
			j.Members(g.group, gen), j.Assignment(g.group, gen), want)
	}
	assignment := j.Assignment(g.group, gen)
	for _, w := range workers {
		member := j.MemberOf(g.group, w.clientID)
		var given []int32
		for _, tp := range assignment[member] {
			given = append(given, tp.Partition)
		}
		var owned []int32
		var printedMember string
		err := testbed.WaitFor(g.ctx, w.clientID+"'s printed ownership", func() bool {
			owned, printedMember = w.printed()
			return slices.Equal(owned, given)
		})
		if err != nil {
			g.t.Fatalf("generation %d: %s (member %s) printed that it owns %v, cohort gave it %v: %v", gen, w.clientID, member, owned, given, err)
		}
		if printedMember != "" && printedMember != member {
			g.t.Errorf("%s printed member id %s, cohort knows it as %s", w.clientID, printedMember, member)
		}
	}
	g.t.Logf("generation %d settled: %v", gen, assignment)
	return gen
}

// checkIdle watches the settled generation gen idle for idleWindow: no new
// generation may begin, and every client must fetch each partition it owns
// at least once and at most maxIdleFetches times.
func (g *bareGroup) checkIdle(gen int32, workers ...*worker) {
	g.t.Helper()
	from := time.Now()
	select {
	case <-time.After(idleWindow):
	case <-g.ctx.Done():
		g.t.Fatal("timed out idling")
	}
	to := time.Now()
	if last := g.b.Journal.LastGeneration(g.group); last != gen {
		g.t.Errorf("generation %d began while the group idled in generation %d", last, gen)
	}
	assignment := g.b.Journal.Assignment(g.group, gen)
	count := map[string]map[testbed.TP]int{}
	requests := map[string]int{}
	wait := map[string]time.Duration{} // the shortest max wait each client asked
	for _, f := range g.b.Fetches(from, to) {
		if count[f.ClientID] == nil {
			count[f.ClientID] = map[testbed.TP]int{}
		}
		for _, tp := range f.TPs {
			count[f.ClientID][tp]++
		}
		requests[f.ClientID]++
		if w, ok := wait[f.ClientID]; !ok || f.MaxWait < w {
			wait[f.ClientID] = f.MaxWait
		}
	}
	window := to.Sub(from)
	for _, w := range workers {
		owned := assignment[g.b.Journal.MemberOf(g.group, w.clientID)]
		asked := wait[w.clientID]
		most := maxIdleFetches
		if asked > 0 {
			most = int(window/asked) + 3
		}
		g.t.Logf("idle %v: %s sent %d Fetch requests asking a max wait of %v or more; per owned partition %v (allowed 1..%d)",
			window.Round(time.Millisecond), w.clientID, requests[w.clientID], asked, count[w.clientID], most)
		if asked < bareFetchWait/2 {
			// kafka-go asks for 3/4 of its MaxWait (it keeps a
			// quarter for the round trip); a client asking much
			// less than it was told would poll cohort too often.
			g.t.Errorf("%s asked a fetch max wait of %v, configured %v", w.clientID, asked, bareFetchWait)
		}
		for _, tp := range owned {
			if n := count[w.clientID][tp]; n < 1 || n > most {
				g.t.Errorf("%s fetched %s %d times in %v of idling (max wait %v), want 1..%d",
					w.clientID, tp, n, window.Round(time.Millisecond), asked, most)
			}
		}
	}
}

// TestBareCohort runs the scenario above for every client, in parallel.
func TestBareCohort(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own bed or node
	for _, c := range workdistClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runBare(t, c)
		})
	}
}

func runBare(t *testing.T, c workdistClient) {
	b := testbed.StartBare(t, map[string]int32{bareTopic: barePartitions})
	goWorkerDir(t) // built before the scenario's clock starts
	ctx, cancel := context.WithTimeout(context.Background(), bareTimeout)
	defer cancel()
	g := &bareGroup{t: t, ctx: ctx, b: b, group: "workdist-" + c.name}
	for p := range int32(barePartitions) {
		g.all = append(g.all, testbed.TP{Topic: bareTopic, Partition: p})
	}
	start := func(i int) *worker {
		return startWorker(t, c, b.Addr(), g.group, fmt.Sprintf("%s-%d", c.name, i))
	}

	w1, w2 := start(1), start(2) // (the first start of a Go example builds them)
	begin := time.Now()
	step := func(what string) { t.Logf("%s at %v", what, time.Since(begin).Round(time.Millisecond)) }
	gen := g.settle(0, w1, w2)
	step("two members settled")
	g.checkIdle(gen, w1, w2)
	w3 := start(3)
	gen = g.settle(gen, w1, w2, w3)
	step("three members settled")
	w1.p.Kill()
	gen = g.settle(gen, w2, w3)
	step("the SIGKILLed member evicted")
	w2.p.Close() // SIGTERM: leave the group
	g.settle(gen, w3)
	step("the stopped member gone")
	w3.p.Close()
	step("the last member stopped")

	j := b.Journal
	for _, err := range []error{j.CheckNoOverlap(g.group), j.CheckCoverage(g.group, g.all), j.CheckCommitFencing(g.group), j.CheckFetchesSeeCommits(g.group)} {
		if err != nil {
			t.Error(err)
		}
	}
	for _, f := range j.FailedCommits(g.group) {
		t.Logf("refused commit %s", f)
	}
	if n := len(j.Commits(g.group)); c.commits && n == 0 {
		t.Errorf("%s committed nothing", c.name)
	}
	if n := b.Requests(w1.clientID, kmsg.LeaveGroup.Int16()); n != 0 {
		t.Errorf("the SIGKILLed %s sent %d LeaveGroup requests", w1.clientID, n)
	}
	for _, w := range []*worker{w2, w3} {
		// The node counts a request once its answer is written, on the
		// connection's goroutine: a client that exits as soon as it has
		// the LeaveGroup answer can be gone before that goroutine runs
		// again, so the count is awaited (bounded), not read at once.
		leaveCtx, cancelLeave := context.WithTimeout(ctx, 5*time.Second)
		err := testbed.WaitFor(leaveCtx, w.clientID+"'s LeaveGroup", func() bool {
			return b.Requests(w.clientID, kmsg.LeaveGroup.Int16()) > 0
		})
		cancelLeave()
		if err != nil {
			t.Errorf("%s left without a LeaveGroup after SIGTERM (none answered within 5s of its exit)", w.clientID)
		}
		if !w.stopped && c.name != "kcat" {
			t.Errorf("%s did not print \"stopped\" after SIGTERM", w.clientID)
		}
		if w.p.err != nil {
			t.Errorf("%s exited with %v after SIGTERM", w.clientID, w.p.err)
		}
	}
	for _, w := range []*worker{w1, w2, w3} {
		w.mu.Lock()
		for line, n := range w.errs {
			t.Logf("%s error line ×%d: %s", w.clientID, n, line)
			if n > maxRepeats {
				t.Errorf("%s repeated an error %d times (at most %d allowed): %s", w.clientID, n, maxRepeats, line)
			}
		}
		w.mu.Unlock()
	}
	if warns := b.Warnings(); len(warns) > 0 {
		t.Errorf("cohort logged %d warnings or errors, first: %s", len(warns), warns[0])
	}
	if t.Failed() || testing.Verbose() {
		j.Dump(t, g.group)
	}
	t.Logf("%s: generations %v, %d acknowledged commits, %v in all", c.name, j.Generations(g.group), len(j.Commits(g.group)),
		time.Since(begin).Round(time.Millisecond))
}

package clients

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/internal/testbin"
	"github.com/cohort-dev/cohort/internal/testpar"
)

// TestMain runs the tests, first telling what to install for the tests of
// the external clients (kafkajs, kcat) when it is missing. Those tests skip
// with that message, but `go test ./...` shows a passing package's output
// only with -v, so the notice also goes to the terminal when there is one.
func TestMain(m *testing.M) {
	if missing := missingTools(); len(missing) > 0 && os.Getenv("CI") == "" {
		notice := "clients: SKIPPING the tests of " + strings.Join(missing, "; ") + "\n"
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			tty.WriteString(notice)
			tty.Close()
		} else {
			os.Stderr.WriteString(notice)
		}
	}
	// The tests here mostly wait: on the clients' session and rebalance
	// timeouts, on child processes, on etcd (83 s of CPU in 391 s of wall
	// time, measured on 2 cores). Four at a time instead of GOMAXPROCS'
	// two; every parallel test runs on its own bed, node or etcd.
	testpar.Default(4)
	// testbin.Run removes the commands the tests built once they end.
	os.Exit(testbin.Run(m))
}

// External clients, each with what its tests need and how to get it.
const (
	kafkajsWhat = "node with kafkajs (clients/kafkajs/node_modules)"
	kafkajsHint = "run `npm ci` in clients/kafkajs"
	kcatWhat    = "kcat"
	kcatHint    = "run `apt-get install -y kcat`"
	// kafka-python: Debian's package, for Debian's own python3 (a Python
	// of a virtual environment or pyenv earlier in PATH does not see it).
	kafkaPythonWhat = "kafka-python (" + kafkaPythonInterpreter + " -c 'import kafka')"
	kafkaPythonHint = "run `apt-get install -y python3-kafka`"
	// kafkaPythonInterpreter is the Python that runs the kafka-python worker.
	kafkaPythonInterpreter = "/usr/bin/python3"
)

func haveKafkajs() bool {
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat("kafkajs/node_modules/kafkajs/package.json")
	return nodeErr == nil && modErr == nil
}

func haveKcat() bool {
	_, err := exec.LookPath("kcat")
	return err == nil
}

// haveKafkaPython reports whether kafkaPythonInterpreter imports kafka.
var haveKafkaPython = sync.OnceValue(func() bool {
	return exec.Command(kafkaPythonInterpreter, "-c", "import kafka").Run() == nil
})

// missingTools describes the external clients that are not installed.
func missingTools() []string {
	var out []string
	if !haveKafkajs() {
		out = append(out, kafkajsWhat+": not installed, "+kafkajsHint)
	}
	if !haveKcat() {
		out = append(out, kcatWhat+": not installed, "+kcatHint)
	}
	if !haveKafkaPython() {
		out = append(out, kafkaPythonWhat+": not installed, "+kafkaPythonHint)
	}
	return out
}

// needKafkajs and needKcat skip a test when the client is missing (see
// needTool).
func needKafkajs(t *testing.T) { needTool(t, kafkajsWhat, kafkajsHint, haveKafkajs()) }
func needKcat(t *testing.T)    { needTool(t, kcatWhat, kcatHint, haveKcat()) }
func needKafkaPython(t *testing.T) {
	needTool(t, kafkaPythonWhat, kafkaPythonHint, haveKafkaPython())
}

// needTool skips a test when an external client is not installed, except in
// CI (CI=true), where .ci/run installs it and its absence is a failure.
func needTool(t *testing.T, what, hint string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed; %s (.ci/run does this)", what, hint)
	}
	t.Skipf("SKIPPED: %s is not installed; %s to run this test", what, hint)
}

// procMember is a child process (kafkajs, kcat, the workdist examples).
type procMember struct {
	t    *testing.T
	cmd  *exec.Cmd
	done chan struct{} // output drained and process reaped
	once sync.Once
	name string
	err  error // cmd.Wait's, once done is closed

	tailMu sync.Mutex
	tail   []string // the last lines it printed (tailLines), for Close's report

	// hang, if set, is a known way its client library hangs in its close;
	// hangMu guards what the output has shown of it so far.
	hang       *knownHang
	hangMu     sync.Mutex
	hangStep   int    // how many of hang.steps the output showed, in order
	hangStacks uint64 // after them, bit i: a line with hang.stacks[i]
	// excused is set by Close when the process did not exit after SIGTERM
	// and was stuck in hang (see knownHang).
	excused bool
}

// knownHang is a way a client library is known to hang in its close after
// SIGTERM (docs/compatibility.md): steps are substrings of output lines that,
// in this order, show the child got into the state that hangs; stacks are
// substrings that the stacks the child prints on SIGQUIT must all contain
// (each on some line) to show it blocked where that hang blocks. Close does
// not fail a child that did not exit when both were seen, and once the
// steps were seen it waits only wait (not closeWait): a close that got
// there ends at once or never.
type knownHang struct {
	name   string
	steps  []string
	stacks []string
	wait   time.Duration
}

// trackHang follows line through m.hang's steps, then looks for its stacks.
func (m *procMember) trackHang(line string) {
	if m.hang == nil {
		return
	}
	m.hangMu.Lock()
	defer m.hangMu.Unlock()
	if m.hangStep < len(m.hang.steps) {
		if strings.Contains(line, m.hang.steps[m.hangStep]) {
			m.hangStep++
		}
		return
	}
	for i, s := range m.hang.stacks {
		if strings.Contains(line, s) {
			m.hangStacks |= 1 << i
		}
	}
}

// hangState reports whether the output showed every step of m.hang and
// then every one of its stacks.
func (m *procMember) hangState() (steps, stacks bool) {
	if m.hang == nil {
		return false, false
	}
	m.hangMu.Lock()
	defer m.hangMu.Unlock()
	return m.hangStep == len(m.hang.steps), m.hangStacks == 1<<len(m.hang.stacks)-1
}

// tailLines is how many of a child's last lines Close quotes when the child
// does not exit: its own failure message then says where the child was, so
// that the end of a long log (all a CI summary may show) explains it.
const tailLines = 12

// remember keeps line among the last tailLines lines m printed.
func (m *procMember) remember(stderr bool, line string) {
	if stderr {
		line = "stderr: " + line
	}
	m.tailMu.Lock()
	defer m.tailMu.Unlock()
	if len(m.tail) == tailLines {
		m.tail = append(m.tail[:0], m.tail[1:]...)
	}
	m.tail = append(m.tail, line)
}

// lastLines is what remember kept, one line each, indented.
func (m *procMember) lastLines() string {
	m.tailMu.Lock()
	defer m.tailMu.Unlock()
	if len(m.tail) == 0 {
		return " (it printed nothing)"
	}
	return "\n\t" + strings.Join(m.tail, "\n\t")
}

// startChild starts cmd and calls onLine with each line it writes, on
// stdout or (stderr true) stderr, from two goroutines.
func startChild(t *testing.T, name string, cmd *exec.Cmd, onLine func(stderr bool, line string)) *procMember {
	t.Helper()
	return startChildHanging(t, name, cmd, nil, onLine)
}

// startChildHanging is startChild for a child whose library may hang in
// its close in the known way hang (nil: none).
func startChildHanging(t *testing.T, name string, cmd *exec.Cmd, hang *knownHang, onLine func(stderr bool, line string)) *procMember {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &procMember{t: t, cmd: cmd, done: make(chan struct{}), name: name, hang: hang}
	var wg sync.WaitGroup
	for _, s := range []struct {
		r   io.Reader
		err bool
	}{{stdout, false}, {stderr, true}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(s.r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				m.remember(s.err, sc.Text())
				m.trackHang(sc.Text())
				onLine(s.err, sc.Text())
			}
		}()
	}
	go func() {
		defer close(m.done)
		wg.Wait()
		m.err = cmd.Wait()
	}()
	return m
}

// startProc runs a group member that prints "REC <partition> <value>" for
// every record it processes; its other lines go to the test log.
func startProc(t *testing.T, c MemberConfig, name string, cmd *exec.Cmd) *procMember {
	return startChild(t, name, cmd, func(stderr bool, line string) {
		if rest, ok := strings.CutPrefix(line, "REC "); ok && !stderr {
			p, v, _ := strings.Cut(rest, " ")
			part, _ := strconv.Atoi(p)
			c.Seen.Add(v)
			if c.OnRecord != nil {
				c.OnRecord(int32(part))
			}
			return
		}
		if stderr {
			t.Logf("%s %s stderr: %s", c.ClientID, name, line)
			return
		}
		t.Logf("%s %s: %s", c.ClientID, name, line)
	})
}

// closeWait is how long Close waits after SIGTERM.
var closeWait = 30 * time.Second

// Close asks the process to stop (SIGTERM: commit and leave) and waits for it,
// at most 30 s. Then it sends SIGQUIT, on which a Go program prints every
// goroutine's stack (to stderr, so to the test log: where it hangs), waits
// up to 5 s more and kills it. A child stuck in its library's known hang
// (knownHang) is logged, not failed, and marked excused.
func (m *procMember) Close() {
	m.once.Do(func() {
		if err := m.stop(closeWait); err != nil {
			m.t.Error(err)
		}
	})
}

// stop is Close's work, with wait for closeWait: nil if the process exited
// after SIGTERM or was stuck in m.hang (then logged and m.excused set),
// else why it did not exit.
func (m *procMember) stop(wait time.Duration) error {
	m.cmd.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	if m.waitExit(wait) {
		return nil
	}
	waited := time.Since(start).Round(time.Second)
	last := m.lastLines()
	m.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
	if steps, stack := m.hangState(); steps && stack {
		m.excused = true
		m.t.Logf("%s, stopped with SIGTERM, is stuck in a known hang of its library, excused: %s (docs/compatibility.md); "+
			"its stacks are above, its last lines before SIGQUIT:%s", m.name, m.hang.name, last)
		return nil
	}
	return fmt.Errorf("%s did not exit %v after SIGTERM; SIGQUIT (stacks follow if it is a Go program), then killing it; its last lines before:%s",
		m.name, waited, last)
}

// waitExit waits for the process to exit, at most wait, or m.hang.wait once
// its output has shown every step of m.hang. It reports whether it exited.
func (m *procMember) waitExit(wait time.Duration) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var poll <-chan time.Time
	if m.hang != nil {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		poll = tick.C
	}
	var since time.Time // when the steps were first seen
	for {
		select {
		case <-m.done:
			return true
		case <-deadline.C:
			return false
		case now := <-poll:
			if steps, _ := m.hangState(); !steps {
				continue
			}
			if since.IsZero() {
				since = now
			}
			if now.Sub(since) >= m.hang.wait {
				return false
			}
		}
	}
}

// Kill SIGKILLs the process.
func (m *procMember) Kill() {
	m.once.Do(func() {
		m.cmd.Process.Kill()
		<-m.done
	})
}

// prefixWriter logs each line written to it with a prefix.
type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l != "" {
			w.t.Log(w.prefix + l)
		}
	}
	return len(p), nil
}

func ms(d time.Duration) string { return strconv.Itoa(int(d.Milliseconds())) }

// startKafkajs runs clients/kafkajs/member.js under node.
func startKafkajs(t *testing.T, b *testbed.Bed, c MemberConfig) Member {
	needKafkajs(t)
	cmd := exec.Command("node", "member.js")
	cmd.Dir = "kafkajs"
	cmd.Env = append(os.Environ(),
		"BROKER="+b.Addr(), "GROUP="+c.Group, "TOPIC="+c.Topic, "CLIENT_ID="+c.ClientID,
		"SESSION_MS="+ms(sessionTimeout), "HEARTBEAT_MS="+ms(heartbeat), "REBALANCE_MS="+ms(rebalanceTimeout),
		"PROCESS_MS="+ms(processTime))
	return startProc(t, c, "kafkajs", cmd)
}

// startKcat runs `kcat -G` (librdkafka's high-level consumer with
// auto-commit) printing every record.
func startKcat(t *testing.T, b *testbed.Bed, c MemberConfig) Member {
	needKcat(t)
	protocol := c.Protocol
	if protocol == "" {
		protocol = "range"
	}
	cmd := exec.Command("kcat", "-b", b.Addr(), "-G", c.Group, "-q", "-u",
		"-f", "REC %p %s\n",
		"-X", "client.id="+c.ClientID,
		"-X", "broker.address.family=v4",
		"-X", "session.timeout.ms="+ms(sessionTimeout),
		"-X", "heartbeat.interval.ms="+ms(heartbeat),
		"-X", "max.poll.interval.ms="+ms(rebalanceTimeout),
		"-X", "partition.assignment.strategy="+protocol,
		"-X", "auto.commit.interval.ms=300",
		"-X", "auto.offset.reset=earliest",
		"-X", "fetch.wait.max.ms=200",
		"-X", "reconnect.backoff.max.ms=500",
		c.Topic)
	return startProc(t, c, "kcat", cmd)
}

// startKafkaPython runs clients/kafkapython/member.py under Debian's python3.
func startKafkaPython(t *testing.T, b *testbed.Bed, c MemberConfig) Member {
	needKafkaPython(t)
	cmd := exec.Command(kafkaPythonInterpreter, "member.py")
	cmd.Dir = "kafkapython"
	cmd.Env = append(os.Environ(),
		"BROKER="+b.Addr(), "GROUP="+c.Group, "TOPIC="+c.Topic, "CLIENT_ID="+c.ClientID, "PROTOCOL="+c.Protocol,
		"SESSION_MS="+ms(sessionTimeout), "HEARTBEAT_MS="+ms(heartbeat), "REBALANCE_MS="+ms(rebalanceTimeout),
		"PROCESS_MS="+ms(processTime))
	return startProc(t, c, "kafka-python", cmd)
}

func TestKafkajsGroupChurn(t *testing.T) { runChurn(t, startKafkajs, "roundrobin") }

func TestKafkaPythonGroupChurn(t *testing.T) { runChurn(t, startKafkaPython, "roundrobin") }

func TestKcatGroupChurn(t *testing.T) { runChurn(t, startKcat, "range") }

// TestChildLastLines: a child's last tailLines lines are what Close quotes
// when it does not exit; stderr's are marked.
func TestChildLastLines(t *testing.T) {
	cmd := exec.Command("sh", "-c", `for i in $(seq 1 14); do echo out$i; done`)
	m := startChild(t, "lines", cmd, func(bool, string) {})
	<-m.done
	var want []string
	for i := 14 - tailLines + 1; i <= 14; i++ {
		want = append(want, "out"+strconv.Itoa(i))
	}
	if got := m.lastLines(); got != "\n\t"+strings.Join(want, "\n\t") {
		t.Errorf("last lines %q, want %q", got, want)
	}
	errs := startChild(t, "stderr", exec.Command("sh", "-c", "echo oops >&2"), func(bool, string) {})
	<-errs.done
	if got := errs.lastLines(); got != "\n\tstderr: oops" {
		t.Errorf("a line on stderr: %q", got)
	}
	quiet := startChild(t, "quiet", exec.Command("true"), func(bool, string) {})
	<-quiet.done
	if got := quiet.lastLines(); got != " (it printed nothing)" {
		t.Errorf("a silent child's last lines: %q", got)
	}
}

// TestCloseKnownHang: Close excuses a child that does not exit after SIGTERM
// only when its output showed the hang's steps in order and then, on
// SIGQUIT, every one of its stacks; it then waits the hang's own wait, not
// the whole close wait. A child that exits is never marked excused.
func TestCloseKnownHang(t *testing.T) {
	hang := &knownHang{name: "test hang", steps: []string{"step-1", "step-2"}, stacks: []string{"frame-a", "frame-b"},
		wait: 100 * time.Millisecond}
	// stuck prints lines, ignores SIGTERM and prints quit on SIGQUIT, then
	// exits; it is returned once it printed them (its traps are set).
	stuck := func(t *testing.T, lines, quit string) *procMember {
		script := `trap "" TERM; trap "` + quit + `exit 2" QUIT; ` + lines + `echo ready; while :; do sleep 0.05; done`
		m := startChildHanging(t, "stuck", exec.Command("sh", "-c", script), hang, func(bool, string) {})
		for end := time.Now().Add(5 * time.Second); !strings.HasSuffix(m.lastLines(), "ready"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the child printed%s", m.lastLines())
			}
		}
		return m
	}
	for _, c := range []struct {
		name, lines, quit string
		excused           bool
	}{
		{"steps then stacks", "echo step-1; echo step-2; ", "echo frame-a; echo x frame-b y; ", true},
		{"one stack missing", "echo step-1; echo step-2; ", "echo frame-a; ", false},
		{"steps out of order", "echo step-2; echo step-1; ", "echo frame-a; echo frame-b; ", false},
		{"stacks before the steps", "echo frame-a; echo frame-b; echo step-1; echo step-2; ", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := stuck(t, c.lines, c.quit)
			start := time.Now()
			err := m.stop(3 * time.Second)
			took := time.Since(start)
			if m.excused != c.excused || (err == nil) != c.excused {
				t.Fatalf("excused %v, error %v; want excused %v", m.excused, err, c.excused)
			}
			if err != nil && !regexp.MustCompile(`^stuck did not exit \d+s after SIGTERM; `).MatchString(err.Error()) {
				t.Errorf("error %q", err)
			}
			// Armed (the steps in order): SIGQUIT after about hang.wait;
			// else after the whole wait.
			armed := c.name != "steps out of order"
			if armed && took >= 2*time.Second || !armed && took < 3*time.Second {
				t.Errorf("stopped after %v (steps seen: %v)", took, armed)
			}
		})
	}
	t.Run("exits", func(t *testing.T) {
		m := startChildHanging(t, "exits", exec.Command("sh", "-c", `echo step-1; echo step-2; exec sleep 5`), hang, func(bool, string) {})
		if err := m.stop(3 * time.Second); err != nil || m.excused {
			t.Errorf("a child that exits on SIGTERM: error %v, excused %v", err, m.excused)
		}
	})
}

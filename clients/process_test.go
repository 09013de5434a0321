package clients

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/clients/testbed"
)

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

// procMember is a group member running as a child process (kafkajs, kcat)
// that prints "REC <partition> <value>" for every record it processes.
type procMember struct {
	t    *testing.T
	cmd  *exec.Cmd
	done chan struct{} // stdout drained and process reaped
	once sync.Once
	name string
}

func startProc(t *testing.T, c MemberConfig, name string, cmd *exec.Cmd) *procMember {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &prefixWriter{t: t, prefix: c.ClientID + " " + name + " stderr: "}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &procMember{t: t, cmd: cmd, done: make(chan struct{}), name: name}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "REC "); ok {
				p, v, _ := strings.Cut(rest, " ")
				part, _ := strconv.Atoi(p)
				c.Seen.Add(v)
				if c.OnRecord != nil {
					c.OnRecord(int32(part))
				}
				continue
			}
			t.Logf("%s %s: %s", c.ClientID, name, line)
		}
		cmd.Wait()
	}()
	return m
}

// Close asks the process to stop (SIGTERM: commit and leave) and waits for it,
// at most 30 s, then kills it.
func (m *procMember) Close() {
	m.once.Do(func() {
		m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
			m.t.Errorf("%s did not exit 30s after SIGTERM; killing it", m.name)
			m.cmd.Process.Kill()
			<-m.done
		}
	})
}

// Kill SIGKILLs the process.
func (m *procMember) Kill() {
	m.once.Do(func() {
		m.cmd.Process.Kill()
		<-m.done
	})
}

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
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat("kafkajs/node_modules/kafkajs/package.json")
	needTool(t, "node with kafkajs (clients/kafkajs/node_modules)", "run `npm ci` in clients/kafkajs", nodeErr == nil && modErr == nil)
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
	_, err := exec.LookPath("kcat")
	needTool(t, "kcat", "run `apt-get install -y kcat`", err == nil)
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

func TestKafkajsGroupChurn(t *testing.T) { runChurn(t, startKafkajs, "roundrobin") }

func TestKcatGroupChurn(t *testing.T) { runChurn(t, startKcat, "range") }

package workdist_test

// TestWorkers runs each worker of examples/workdist as a child process, alone
// in a new group, against an in-process node (clients/testbed.Bare, whose
// journal records what the node acknowledged). The -bootstrap flag is a list
// of two addresses, the node's and a TCP proxy's in front of it, with spaces
// and an empty entry, as a user would type a cluster's addresses. Each worker
// must be assigned every partition, and every partition must be committed in
// that first generation: by sarama, kafka-go, kafkajs and kafka-python while the worker
// owns it (docs/workdist.md: they commit after the assignment), by franz-go
// and confluent-kafka-go in the revoke callback on SIGTERM. The fuller
// scenarios (several workers, SIGKILL, idling) are clients/bare_test.go's.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/internal/testbin"
	"github.com/cohort-dev/cohort/member/membertest"
)

const (
	topic      = "jobs"
	partitions = 4
)

// client is one worker of examples/workdist.
type client struct {
	name string
	// whileOwned: the worker commits while it owns the partitions, not
	// only when it gives them up.
	whileOwned bool
}

var clients = []client{
	{name: "franzgo"},
	{name: "sarama", whileOwned: true},
	{name: "kafkago", whileOwned: true},
	{name: "confluent"},
	{name: "kafkajs", whileOwned: true},
	{name: "kafkapython", whileOwned: true},
}

// script reports whether c's worker is a script (kafkajs, kafka-python),
// not a Go program of this module.
func (c client) script() bool { return c.name == "kafkajs" || c.name == "kafkapython" }

// command is the worker process of c with the given bootstrap list.
func command(t *testing.T, c client, bootstrap, group string) *exec.Cmd {
	t.Helper()
	common := []string{"bootstrap", bootstrap, "group", group, "topic", topic, "client-id", c.name + "-1"}
	var args []string
	if c.script() {
		for i := 0; i < len(common); i += 2 {
			args = append(args, "--"+common[i], common[i+1])
		}
		args = append(args, "--session-timeout-ms", "6000", "--fetch-max-wait-ms", "500")
	}
	if c.name == "kafkapython" {
		// Debian's python3 with its python3-kafka (clients/process_test.go).
		const python = "/usr/bin/python3"
		if exec.Command(python, "-c", "import kafka").Run() != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("kafka-python is not installed for " + python + " (.ci/run installs python3-kafka)")
			}
			t.Skip("SKIPPED: kafka-python is not installed for " + python + "; run `apt-get install -y python3-kafka` to run this test")
		}
		return exec.Command(python, append([]string{"kafkapython/worker.py"}, args...)...)
	}
	if c.name == "kafkajs" {
		modules, err := filepath.Abs("../../clients/kafkajs/node_modules")
		if err != nil {
			t.Fatal(err)
		}
		_, nodeErr := exec.LookPath("node")
		if _, err := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); err != nil || nodeErr != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("node with kafkajs (clients/kafkajs/node_modules) is not installed (.ci/run installs it)")
			}
			t.Skip("SKIPPED: node with kafkajs is not installed; run `npm ci` in clients/kafkajs to run this test")
		}
		cmd := exec.Command("node", append([]string{"kafkajs/worker.js"}, args...)...)
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		return cmd
	}
	for i := 0; i < len(common); i += 2 {
		args = append(args, "-"+common[i], common[i+1])
	}
	args = append(args, "-session-timeout", "6s", "-fetch-max-wait", "500ms")
	var pkgs []string
	for _, c := range clients {
		if !c.script() {
			pkgs = append(pkgs, "github.com/cohort-dev/cohort/examples/workdist/"+c.name)
		}
	}
	return exec.Command(filepath.Join(testbin.Build(t, pkgs...), c.name), args...)
}

// lines is a process's stdout or stderr: it keeps the complete lines
// written to it and logs them.
type lines struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	part   []byte
	all    []string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		line, rest, ok := bytes.Cut(l.part, []byte("\n"))
		if !ok {
			return len(p), nil
		}
		l.t.Logf("%s%s", l.prefix, line)
		l.all = append(l.all, string(line))
		l.part = rest
	}
}

// has reports whether a line satisfies f.
func (l *lines) has(f func(string) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.all, f)
}

func TestWorkers(t *testing.T) {
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runWorker(t, c)
		})
	}
}

func runWorker(t *testing.T, c client) {
	b := testbed.StartBare(t, map[string]int32{topic: partitions}) // (skipped under -short)
	proxy := membertest.NewProxy(t)
	proxy.SetTarget(b.Addr())
	group := "workdist-" + c.name
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	cmd := command(t, c, fmt.Sprintf(" %s , %s ,", b.Addr(), proxy.Addr()), group)
	out, errs := &lines{t: t}, &lines{t: t, prefix: "stderr: "}
	cmd.Stdout, cmd.Stderr = out, errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})

	all := make([]string, partitions)
	for p := range partitions {
		all[p] = fmt.Sprint(p)
	}
	everything := "assigned " + strings.Join(all, ",")
	assignCtx, cancelAssign := context.WithTimeout(ctx, 30*time.Second)
	err := testbed.WaitFor(assignCtx, "an \""+everything+"\" line", func() bool {
		return out.has(func(l string) bool { return l == everything || strings.HasPrefix(l, everything+" ") })
	})
	cancelAssign()
	if err != nil {
		t.Fatal(err)
	}
	j := b.Journal
	gen := j.LastGeneration(group)
	// committed reports whether every partition has an acknowledged
	// commit of generation gen.
	committed := func() bool {
		seen := map[int32]bool{}
		for _, cm := range j.Commits(group) {
			if cm.Topic == topic && cm.Gen == gen {
				seen[cm.Partition] = true
			}
		}
		return len(seen) == partitions
	}
	if c.whileOwned {
		commitCtx, cancelCommit := context.WithTimeout(ctx, 15*time.Second)
		err := testbed.WaitFor(commitCtx, fmt.Sprintf("commits of every partition in generation %d", gen), committed)
		cancelCommit()
		if err != nil {
			t.Errorf("%s, while it owns the partitions: %v (acknowledged commits %v, refused %v)", c.name, err, j.Commits(group), j.FailedCommits(group))
		}
		if last := j.LastGeneration(group); last != gen {
			t.Errorf("generation %d began: the lone worker rebalanced", last)
		}
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM", c.name, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not exit within 20s of SIGTERM", c.name)
	}
	if !out.has(func(l string) bool { return l == "stopped" }) {
		t.Errorf("%s did not print \"stopped\"", c.name)
	}
	if !committed() {
		t.Errorf("%s did not commit every partition in its generation %d (acknowledged commits %v, refused %v)", c.name, gen, j.Commits(group), j.FailedCommits(group))
	}
	if errs.has(func(l string) bool { return strings.HasPrefix(l, "error:") }) {
		t.Errorf("%s printed errors (above)", c.name)
	}
}

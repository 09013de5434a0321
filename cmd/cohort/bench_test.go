package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

// benchTarget starts an in-process node for cohort bench to measure and
// returns its address.
func benchTarget(t *testing.T) string {
	t.Helper()
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n, err := node.Start(node.Config{Listen: "127.0.0.1:0", Store: memstore.New(), Group: cfg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	n.WaitLoaded(context.Background())
	return n.Addr()
}

// benchLeftovers lists the topics and groups named cohort-bench-… on the
// target at addr, and how many of those groups are Stable. Each call has
// its own client: kgo answers a Metadata request from its cache for a few
// seconds.
func benchLeftovers(t *testing.T, addr string) (topics, groups []string) {
	topics, groups, _ = benchState(t, addr)
	return topics, groups
}

func benchState(t *testing.T, addr string) (topics, groups []string, stable int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ts, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ts.Names() {
		if strings.HasPrefix(name, "cohort-bench-") {
			topics = append(topics, name)
		}
	}
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs.Sorted() {
		if strings.HasPrefix(g.Group, "cohort-bench-") {
			groups = append(groups, g.Group)
			if g.State == "Stable" {
				stable++
			}
		}
	}
	return topics, groups, stable
}

// runBench runs cohort bench with args and env (added to this
// process's), bounded in time, and returns its exit code, stdout, stderr.
func runBench(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := cohortCommand(ctx, t, append([]string{"bench"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestBenchBootstrapFromEnv: without --bootstrap, cohort bench measures
// $COHORT_BOOTSTRAP, as the other commands do.
func TestBenchBootstrapFromEnv(t *testing.T) {
	addr := benchTarget(t)
	code, stdout, stderr := runBench(t, []string{"COHORT_BOOTSTRAP=" + addr},
		"--only", "commit", "--committers", "1", "--partitions-per-commit", "1", "--duration", "200ms", "-q")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, addr) {
		t.Fatalf("the report does not name the target %s:\n%s", addr, stdout)
	}
	if topics, groups := benchLeftovers(t, addr); len(topics)+len(groups) > 0 {
		t.Fatalf("left behind: topics %v groups %v", topics, groups)
	}
}

// TestBenchUnreachable: a target nothing listens on is one error line
// naming the address, and exit status 1.
func TestBenchUnreachable(t *testing.T) {
	addr := closedAddr(t)
	code, _, stderr := runBench(t, nil, "--bootstrap", addr, "--members", "50")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "cannot reach "+addr) {
		t.Fatalf("stderr %q: want one line saying it cannot reach %s", stderr, addr)
	}
}

// TestBenchInterrupted: a signal in the middle of a case stops the run,
// the benchmark deletes the topics and groups it created, and exits with
// 128 + the signal's number.
func TestBenchInterrupted(t *testing.T) {
	for _, c := range []struct {
		name string
		sig  syscall.Signal
		args []string
		// ready: what must exist on the target before the signal (the
		// case is past its setup: a member caught between its JoinGroup
		// and the answer stays pending, and its group undeletable, until
		// its session times out).
		topics, groups, stable int
	}{
		{"commit, SIGINT", syscall.SIGINT,
			[]string{"--only", "commit", "--committers", "3", "--partitions-per-commit", "2"}, 1, 3, 0},
		{"heartbeat, SIGTERM", syscall.SIGTERM,
			[]string{"--only", "heartbeat", "--heartbeat-members", "6", "--groups", "2"}, 0, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := benchTarget(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			args := append([]string{"bench", "--bootstrap", addr, "--duration", "10m"}, c.args...)
			cmd := cohortCommand(ctx, t, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// Wait (bounded) until the case is under way: its topics
			// and groups exist.
			var topics, groups []string
			if !testwait.Until(30*time.Second, func() bool {
				var stable int
				topics, groups, stable = benchState(t, addr)
				return len(topics) >= c.topics && len(groups) >= c.groups && stable >= c.stable
			}) {
				t.Fatalf("after 30s: topics %v groups %v; stderr:\n%s", topics, groups, stderr.String())
			}
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 128+int(c.sig) {
				t.Fatalf("after %v: %v, want exit status %d; stderr:\n%s", c.sig, err, 128+int(c.sig), stderr.String())
			}
			if topics, groups := benchLeftovers(t, addr); len(topics)+len(groups) > 0 {
				t.Fatalf("left behind: topics %v groups %v; stderr:\n%s", topics, groups, stderr.String())
			}
			if !strings.Contains(stderr.String(), "stopped by") || stdout.Len() != 0 {
				t.Fatalf("stdout %q stderr %q: want no report and a line saying it was stopped", stdout.String(), stderr.String())
			}
		})
	}
}

// TestBenchUsageErrors: a mistake on bench's command line is one line and
// exit status 2, like every other command's; -h is status 0.
func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"--repeat", "0"}, {"--members", "x"}, {"extra"}} {
		code, _, stderr := runBench(t, nil, args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("bench %v: exit %d, stderr %q; want 2 and one line", args, code, stderr)
		}
	}
	if code, _, _ := runBench(t, nil, "-h"); code != 0 {
		t.Errorf("bench -h: exit %d, want 0", code)
	}
}

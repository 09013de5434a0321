package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/heapfloor"
	"github.com/cohort-dev/cohort/internal/hugepages"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

// serveEnv names the target a re-executed test binary serves (see
// TestMain): the isolated benchmark runs each server in its own process,
// pinned to its own core.
const serveEnv = "COHORT_BENCH_SERVE"

func TestMain(m *testing.M) {
	if name := os.Getenv(serveEnv); name != "" {
		os.Exit(serveChild(name))
	}
	os.Exit(m.Run())
}

// serveChild starts the named target on 127.0.0.1, prints "ADDR host:port",
// and serves until its standard input closes. The cohort targets advise
// their heap to use huge pages, as cohort serve does by default
// (--heap-huge-pages); with the suffix "-4k" (cohort-mem-4k, cohort-disk-4k)
// they do not. They keep the collector's goal at cohort serve's floor
// (--heap-floor-mib) as well. The suffix "-nohistory", last, turns the
// rebalance history off (cohort-mem-nohistory, cohort-mem-4k-nohistory).
func serveChild(name string) int {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var addr string
	var stop func()
	history := true
	if base, ok := strings.CutSuffix(name, "-nohistory"); ok && strings.HasPrefix(base, "cohort-") {
		name, history = base, false
	}
	if strings.HasPrefix(name, "cohort-") {
		defer heapfloor.Start(heapfloor.DefaultMiB << 20)() // as cohort serve does
	}
	if base, ok := strings.CutSuffix(name, "-4k"); ok && strings.HasPrefix(base, "cohort-") {
		name = base
	} else if strings.HasPrefix(name, "cohort-") {
		if _, stopAdvice, err := hugepages.Enable(hugepages.DefaultReserve); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		} else {
			defer stopAdvice()
		}
	}
	switch name {
	case "cohort-mem", "cohort-disk":
		cfg := group.Defaults()
		cfg.InitialRebalanceDelay = 0
		if !history {
			noHistory(&cfg)
		}
		nc := node.Config{Listen: "127.0.0.1:0", Group: cfg, Logger: logger}
		if name == "cohort-mem" {
			nc.Store = memstore.New()
		} else {
			dir, err := os.MkdirTemp("", "cohort-bench-*")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			nc.DataDir = dir
		}
		n, err := node.Start(nc)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = n.WaitLoaded(ctx)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		addr, stop = n.Addr(), func() { n.Close() }
	case "kfake":
		// Sessions up to cohort's bound (Kafka's default, 30 minutes;
		// kfake's own is 5): TestConnMemory's idle members use 25.
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMaxSessionTimeout(30*time.Minute))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		addr, stop = c.ListenAddrs()[0], c.Close
	case "floor":
		f := startFloor(childTB{})
		addr, stop = f.addr(), f.close
	default:
		fmt.Fprintf(os.Stderr, "unknown target %q\n", name)
		return 2
	}
	window := os.Getenv(windowProfileEnv) != ""
	if path := os.Getenv(childProfileEnv); path != "" && !window {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("ADDR %s\n", addr)
	// Until the parent closes standard input; "MEM" asks for the live heap
	// and the goroutine stacks in use, after two collections (and writes
	// the heap profile beside the CPU profile, if there is one).
	// With windowProfileEnv set, "PROF START tag" starts a CPU profile
	// (and a runtime trace) of a window the parent chooses, "PROF STOP"
	// ends it; both are answered "PROF OK" once done.
	var win *windowProfile
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if n, ok := strings.CutPrefix(in.Text(), "PROF START "); ok && window {
			var err error
			win, err = startWindowProfile(os.Getenv(childProfileEnv), n)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			fmt.Println("PROF OK")
			continue
		}
		if in.Text() == "PROF STOP" && window {
			win.stop()
			win = nil
			fmt.Println("PROF OK")
			continue
		}
		if in.Text() == "MEM" {
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if path := os.Getenv(childProfileEnv); path != "" {
				// Beside the CPU profile: the heap in use now.
				if f, err := os.Create(strings.TrimSuffix(path, ".pprof") + ".heap"); err == nil {
					pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
			fmt.Printf("MEM %d %d\n", ms.HeapAlloc, ms.StackInuse)
		}
	}
	stop()
	return 0
}

// childProfileEnv, when set, is the file a served child writes its CPU
// profile to (from its address line until its standard input closes).
const childProfileEnv = "COHORT_BENCH_CHILD_CPUPROFILE"

// windowProfileEnv makes a profiled child (COHORT_BENCH_PROFILE_DIR) profile
// only the windows its parent marks (childTarget.profile) instead of its
// whole life: each window's CPU profile goes to <target>.<tag>.pprof in the
// directory and, unless the variable is "cpu", its runtime trace to
// <target>.<tag>.trace (a trace slows the server down by a third or more).
// TestBigRebalance marks each round, from the first JoinGroup sent to the
// last member synced, tagged with its group's name.
const windowProfileEnv = "COHORT_BENCH_WINDOW_PROFILE"

// windowProfile is one marked window's CPU profile and runtime trace (nil
// when not asked for).
type windowProfile struct{ cpu, tr *os.File }

// startWindowProfile starts the profile (and the trace) of the window
// tagged n, in files named after path, the child's whole-life profile.
func startWindowProfile(path, n string) (*windowProfile, error) {
	if path == "" {
		return nil, fmt.Errorf("%s needs %s", windowProfileEnv, childProfileEnv)
	}
	base := strings.TrimSuffix(path, ".pprof") + "." + n
	w := &windowProfile{}
	var err error
	if w.cpu, err = os.Create(base + ".pprof"); err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(w.cpu); err != nil {
		w.cpu.Close()
		return nil, err
	}
	if os.Getenv(windowProfileEnv) == "cpu" {
		return w, nil
	}
	if w.tr, err = os.Create(base + ".trace"); err != nil {
		w.stop()
		return nil, err
	}
	if err := trace.Start(w.tr); err != nil {
		w.tr.Close()
		w.tr = nil
		w.stop()
		return nil, err
	}
	return w, nil
}

func (w *windowProfile) stop() {
	if w == nil {
		return
	}
	if w.tr != nil {
		trace.Stop()
		w.tr.Close()
	}
	pprof.StopCPUProfile()
	w.cpu.Close()
}

// profile marks the start (on) or the end of a profiled window of the
// child, its files named after tag, and waits for the child's answer. It
// does nothing unless windowProfileEnv is set, nor for a base target (a
// binary of another commit may not know the command).
func (c *childTarget) profile(on bool, tag string) error {
	if os.Getenv(windowProfileEnv) == "" || strings.HasPrefix(c.name, baseTarget) {
		return nil
	}
	cmd := "PROF STOP\n"
	if on {
		cmd = "PROF START " + tag + "\n"
	}
	if _, err := io.WriteString(c.stdin, cmd); err != nil {
		return err
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "PROF OK" {
		return fmt.Errorf("%s: unexpected answer %q", c.name, line)
	}
	return nil
}

// childTB is the testing.TB the floor server needs in a child process:
// failures go to stderr.
type childTB struct{ testing.TB }

func (childTB) Fatal(args ...any)                 { fmt.Fprintln(os.Stderr, args...); os.Exit(1) }
func (childTB) Errorf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// childTarget is a target served by a child process pinned to one core.
type childTarget struct {
	name  string
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader // the child's standard output after its address
}

// mem asks the child for its live heap and goroutine stacks in use (after
// two collections). A base target's binary may not answer: then an error
// after timeout.
func (c *childTarget) mem(timeout time.Duration) (heap, stack uint64, err error) {
	if _, err := io.WriteString(c.stdin, "MEM\n"); err != nil {
		return 0, 0, err
	}
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := c.out.ReadString('\n')
		ch <- answer{line, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			return 0, 0, a.err
		}
		if _, err := fmt.Sscanf(a.line, "MEM %d %d", &heap, &stack); err != nil {
			return 0, 0, fmt.Errorf("%s: unexpected answer %q", c.name, a.line)
		}
		return heap, stack, nil
	case <-time.After(timeout):
		return 0, 0, fmt.Errorf("%s: no memory figures from the child in %v", c.name, timeout)
	}
}

func startChild(t *testing.T, name string, cpu int) *childTarget {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	served := name
	if b, ok := strings.CutPrefix(name, baseTarget); ok {
		// The same target on another commit, for an A/B comparison in
		// one run (this VM's speed moves by a third between runs).
		served, exe = b, os.Getenv(baseBinEnv)
		if exe == "" {
			t.Fatalf("target %s needs %s: a bench test binary of the base commit (go test -c -o FILE ./bench/)", name, baseBinEnv)
		}
	}
	cmd := exec.Command("taskset", "-c", strconv.Itoa(cpu), exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"="+served, "GOMAXPROCS=")
	if dir := os.Getenv("COHORT_BENCH_PROFILE_DIR"); dir != "" {
		cmd.Env = append(cmd.Env, childProfileEnv+"="+filepath.Join(dir, strings.ReplaceAll(name, ":", "-")+".pprof"))
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childTarget{name: name, cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(c.stop)
	line, err := c.out.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: no address from the child: %v", name, err)
	}
	c.addr = strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
	return c
}

func (c *childTarget) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// pinSelf restricts every thread of this process to cpu (and the runtime to
// one P) and returns the function that undoes it.
func pinSelf(t *testing.T, cpu int) func() {
	t.Helper()
	pid := strconv.Itoa(os.Getpid())
	if out, err := exec.Command("taskset", "-a", "-p", "-c", strconv.Itoa(cpu), pid).CombinedOutput(); err != nil {
		t.Fatalf("taskset: %v: %s", err, out)
	}
	procs := runtime.GOMAXPROCS(1)
	return func() {
		runtime.GOMAXPROCS(procs)
		all := fmt.Sprintf("0-%d", runtime.NumCPU()-1)
		if out, err := exec.Command("taskset", "-a", "-p", "-c", all, pid).CombinedOutput(); err != nil {
			t.Errorf("taskset: %v: %s", err, out)
		}
	}
}

// A target named baseTarget+<name> (base:cohort-mem) is <name> served by the
// test binary at $COHORT_BENCH_BASE_BIN, built from another commit, so that a
// change and its base run interleaved in one run:
//
//	git stash && go test -c -o /tmp/bench.base ./bench/ && git stash pop
//	COHORT_BENCH=1 COHORT_BENCH_BASE_BIN=/tmp/bench.base \
//	  COHORT_BENCH_TARGETS=floor,cohort-mem,base:cohort-mem go test -run TestServerCPU -v ./bench/
const (
	baseTarget = "base:"
	baseBinEnv = "COHORT_BENCH_BASE_BIN"
)

// startChildren starts a child process pinned to core 0 for each target
// named by COHORT_BENCH_TARGETS (comma-separated), or else for each of def.
func startChildren(t *testing.T, def ...string) []*childTarget {
	names := def
	if v := os.Getenv("COHORT_BENCH_TARGETS"); v != "" {
		names = strings.Split(v, ",")
	}
	var cs []*childTarget
	for _, n := range names {
		cs = append(cs, startChild(t, n, 0))
	}
	return cs
}

// TestIsolated runs the heartbeat and commit loads with each server in its
// own process pinned to core 0 and the load generator (this process) pinned
// to core 1, so that the client's CPU is not taken from the server: it
// measures what each server does with one core. Targets: the floor server,
// cohort (memory and disk stores) and kfake; three interleaved series,
// medians. Only with COHORT_BENCH=1 (it needs taskset and two cores).
func TestIsolated(t *testing.T) {
	if testing.Short() || os.Getenv("COHORT_BENCH") != "1" {
		t.Skip("COHORT_BENCH=1 runs the isolated benchmark")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs two cores")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("needs taskset (util-linux)")
	}
	committers := benchCommitters(t, []int{16, 64, 256})
	const members = 200
	if err := RaiseFileLimit(4 * (members + 256)); err != nil {
		t.Skip(err)
	}
	var tgts []namedAddr
	for _, c := range startChildren(t, "floor", "cohort-mem", "cohort-disk", "kfake") {
		tgts = append(tgts, namedAddr{c.name, c.addr})
	}
	defer pinSelf(t, 1)()
	s := runSeries(t, tgts, members, committers, time.Second, 3, "iso")
	t.Log("\n" + s.table(tgts))
}

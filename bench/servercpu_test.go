package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procCPU is the CPU time (all threads) process pid has used so far: the
// sum of its threads' time on a CPU from /proc/<pid>/task/*/schedstat, in
// nanoseconds, or, where the kernel does not keep those, utime + stime from
// /proc/<pid>/stat (clock ticks, 10 ms each: too coarse for the short windows
// of a loaded machine). A thread that exits takes its time with it; the Go
// runtime rarely ends threads.
func procCPU(pid int) (time.Duration, bool) {
	if d, ok := procSchedCPU(pid); ok {
		return d, true
	}
	return procStatCPU(pid)
}

func procSchedCPU(pid int) (time.Duration, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum int64
	for _, tk := range tasks {
		b, err := os.ReadFile(dir + "/" + tk.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += ns
	}
	return time.Duration(sum), true
}

// procStatCPU is utime + stime of /proc/<pid>/stat (fields 14 and 15, in
// clock ticks of USER_HZ, which Linux fixes at 100 for /proc).
func procStatCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const tick = 10 * time.Millisecond // 1/USER_HZ
	return time.Duration(ut+st) * tick, true
}

func TestProcCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	pid := os.Getpid()
	s0, ok1 := procSchedCPU(pid)
	c0, ok2 := procStatCPU(pid)
	if !ok2 {
		t.Fatal("no CPU time for this process in /proc/<pid>/stat")
	}
	// Burn at least 60 ms of CPU (bounded by 5 s of wall time).
	own0, _ := processCPU()
	for until := time.Now().Add(5 * time.Second); time.Now().Before(until); {
		x := 0
		for i := range 1_000_000 {
			x += i
		}
		_ = x
		if own, _ := processCPU(); own-own0 > 60*time.Millisecond {
			break
		}
	}
	own1, _ := processCPU()
	c1, _ := procStatCPU(pid)
	if d := c1 - c0; d < 30*time.Millisecond {
		t.Errorf("/proc/<pid>/stat says %v of CPU used while burning more than 60 ms", d)
	}
	if ok1 {
		s1, _ := procSchedCPU(pid)
		// getrusage and schedstat count the same time: within 20%.
		if d, own := s1-s0, own1-own0; d < own*8/10 || d > own*12/10 {
			t.Errorf("schedstat says %v of CPU used, getrusage %v", d, own)
		}
	}
}

// TestServerCPU measures each server's own CPU time per request: every
// server runs in its own process (as in TestIsolated: pinned to core 0,
// the load generator to core 1), and the CPU its process used during each
// measured window, read from /proc/<pid>/stat, is divided by the requests
// answered in the window. Cases: heartbeats (200 members, one group),
// commits of 1 and of 50 partitions (COHORT_BENCH_COMMITTERS committers,
// default 16). Targets: the floor server, cohort-mem, cohort-disk and kfake
// (COHORT_BENCH_TARGETS), interleaved, COHORT_BENCH_REPEAT series (5),
// medians. COHORT_BENCH_PROFILE_DIR=dir writes each server's CPU profile
// to dir/<target>.pprof; COHORT_BENCH_ONLY=heartbeat skips the commits,
// COHORT_BENCH_ONLY=commit1 (commit50) runs only the 1-partition
// (50-partition) commits, so that a profile shows that path alone. A target named base:<name> is <name>
// served by another commit's test binary (COHORT_BENCH_BASE_BIN, see
// startChild), and each target is also paired with its base.
// Only with COHORT_BENCH=1.
func TestServerCPU(t *testing.T) {
	if testing.Short() || os.Getenv("COHORT_BENCH") != "1" {
		t.Skip("COHORT_BENCH=1 runs the server CPU benchmark")
	}
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("needs /proc and two cores")
	}
	committers := benchCommitters(t, []int{16})
	only := os.Getenv("COHORT_BENCH_ONLY")
	partitions := []int{1, 50}
	switch only {
	case "":
	case "heartbeat":
		committers = nil // heartbeats only (profiling their path)
	case "commit1":
		partitions = []int{1}
	case "commit50":
		partitions = []int{50}
	default:
		t.Fatalf("COHORT_BENCH_ONLY=%q: heartbeat, commit1 or commit50", only)
	}
	repeat := 5
	if v := os.Getenv("COHORT_BENCH_REPEAT"); v != "" {
		var err error
		if repeat, err = strconv.Atoi(v); err != nil || repeat < 1 {
			t.Fatalf("COHORT_BENCH_REPEAT=%q", v)
		}
	}
	window := 2 * time.Second
	const members = 200
	if err := RaiseFileLimit(4 * (members + 256)); err != nil {
		t.Skip(err)
	}
	children := startChildren(t, "floor", "cohort-mem", "cohort-disk", "kfake")
	defer pinSelf(t, 1)()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// perReq[case][target] holds one server CPU time per request per series.
	perReq := map[string]map[string][]time.Duration{}
	var cases []string
	record := func(c *childTarget, name string, tp Throughput) {
		if tp.OK <= 0 || tp.ServerCPU <= 0 {
			t.Errorf("%s %s: nothing measured: %+v", c.name, name, tp)
			return
		}
		if perReq[name] == nil {
			perReq[name] = map[string][]time.Duration{}
			cases = append(cases, name)
		}
		d := tp.ServerCPU / time.Duration(tp.OK)
		perReq[name][c.name] = append(perReq[name][c.name], d)
		t.Logf("%s %s: %.0f/s, server CPU %v in %v = %v/req", c.name, name, tp.PerSec(), tp.ServerCPU, tp.Window, d)
	}
	for rep := range repeat {
		for _, c := range children {
			pid := c.cmd.Process.Pid
			cctx := withServerCPU(ctx, func() (time.Duration, bool) { return procCPU(pid) })
			cfg := Defaults()
			cfg.Bootstrap, cfg.Duration, cfg.RoundTimeout = c.addr, window, 30*time.Second
			cfg.Prefix = fmt.Sprintf("cpu-%s-%d", strings.ReplaceAll(c.name, ":", "-"), rep)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			var tp Throughput
			var err error
			if only != "commit1" && only != "commit50" {
				if c.name == "floor" {
					tp, err = floorHeartbeats(cctx, c.addr, members, window)
				} else {
					tp, err = heartbeatCase(cctx, cfg, members, 1)
				}
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				record(c, fmt.Sprintf("heartbeat, %d members", members), tp)
			}
			for _, n := range committers {
				for _, parts := range partitions {
					if c.name == "floor" {
						tp, err = floorCommits(cctx, c.addr, n, parts, window)
					} else {
						tp, err = commitCase(cctx, cfg, n, parts)
					}
					if err != nil {
						t.Fatalf("%s: %v", c.name, err)
					}
					record(c, fmt.Sprintf("commit, %d committers × %d partitions", n, parts), tp)
				}
			}
		}
	}
	var sb strings.Builder
	sb.WriteString("\n| server CPU per request |")
	for _, c := range children {
		sb.WriteString(" " + c.name + " |")
	}
	var others []string
	for _, c := range children {
		if c.name != "floor" && c.name != "kfake" {
			others = append(others, c.name)
		}
	}
	for _, o := range others {
		sb.WriteString(" " + o + " / floor | " + o + " / kfake |")
	}
	sb.WriteString("\n|---|" + strings.Repeat("---:|", len(children)+2*len(others)) + "\n")
	for _, name := range cases {
		med := map[string]time.Duration{}
		fmt.Fprintf(&sb, "| %s |", name)
		for _, c := range children {
			xs := slices.Clone(perReq[name][c.name])
			slices.Sort(xs)
			if len(xs) > 0 {
				med[c.name] = xs[len(xs)/2]
			}
			fmt.Fprintf(&sb, " %.1f µs |", float64(med[c.name])/1e3)
		}
		for _, o := range others {
			for _, base := range []string{"floor", "kfake"} {
				if med[base] > 0 {
					fmt.Fprintf(&sb, " %.2f× |", float64(med[o])/float64(med[base]))
				} else {
					sb.WriteString(" – |")
				}
			}
		}
		sb.WriteString("\n")
	}
	// The same ratios paired by series: the targets of one series run
	// minutes apart at most, while this machine's speed moves by a third
	// between runs, so the ratio within a series is the steadier figure.
	sb.WriteString("\nPaired by series (geometric mean of the per-series ratios, 95% CI, series at or below 1.25× the floor / 0.6× kfake / 1.0× the base commit):\n")
	for _, name := range cases {
		for _, o := range others {
			fmt.Fprintf(&sb, "- %s, %s:", name, o)
			for _, base := range []string{"floor", "kfake", baseTarget + o} {
				xs, bs := perReq[name][o], perReq[name][base]
				if len(bs) != len(xs) || len(xs) == 0 {
					continue
				}
				goal, ok := map[string]float64{"floor": 1.25, "kfake": 0.6}[base]
				if !ok {
					goal = 1 // against the same target on the base commit
				}
				rs := make([]float64, len(xs))
				within := 0
				for i := range xs {
					rs[i] = float64(xs[i]) / float64(bs[i])
					if rs[i] <= goal {
						within++
					}
				}
				m, lo, hi := geoMeanCI(rs)
				fmt.Fprintf(&sb, " / %s %.2f× (%.2f–%.2f, %d of %d)", base, m, lo, hi, within, len(rs))
			}
			sb.WriteString("\n")
		}
	}
	t.Log(sb.String())
}

package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/disk"
	"github.com/cohort-dev/cohort/store/memstore"
)

// target is one coordinator under test, started in-process on 127.0.0.1.
type target struct {
	name  string
	start func(t *testing.T) (addr string, stop func())
}

// storeKind selects cohort's store in a benchmark target.
type storeKind int

const (
	memStore   storeKind = iota // in memory
	diskStore                   // the embedded pebble store, fsync per batch (the default)
	diskNoSync                  // the same without fsync: the durability ceiling
)

func startCohort(t *testing.T, kind storeKind) (string, func()) {
	return startCohortLoops(t, kind, 0)
}

// startCohortLoops starts cohort with the given number of coordinator
// partitions (0 = the default 50), i.e. that many event loops.
func startCohortLoops(t *testing.T, kind storeKind, partitions int) (string, func()) {
	return startCohortWith(t, kind, partitions, nil)
}

// startCohortWith is startCohortLoops with tune (if not nil) adjusting the
// group configuration.
func startCohortWith(t *testing.T, kind storeKind, partitions int, tune func(*group.Config)) (string, func()) {
	return startCohortNode(t, kind, partitions, tune, false)
}

// startCohortNode is startCohortWith, with every metric off if noMetrics
// (node.Config.DisableMetrics): the peer that measures what metrics cost.
func startCohortNode(t *testing.T, kind storeKind, partitions int, tune func(*group.Config), noMetrics bool) (string, func()) {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	if tune != nil {
		tune(&cfg)
	}
	nc := node.Config{
		Listen:     "127.0.0.1:0",
		Partitions: partitions,
		Group:      cfg,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		// DisableMetrics: see startCohortNode.
		DisableMetrics: noMetrics,
	}
	var closeStore func() error
	switch kind {
	case diskStore:
		nc.DataDir = t.TempDir()
	case diskNoSync:
		st, err := disk.Open(disk.Options{Dir: t.TempDir(), NoSync: true, Logger: nc.Logger})
		if err != nil {
			t.Fatal(err)
		}
		nc.Store, closeStore = st, st.Close
	default:
		nc.Store = memstore.New()
	}
	n, err := node.Start(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitLoaded(ctx); err != nil {
		n.Close()
		t.Fatal(err)
	}
	return n.Addr(), func() {
		if err := n.Close(); err != nil {
			t.Errorf("closing cohort: %v", err)
		}
		if closeStore != nil {
			closeStore()
		}
	}
}

// noHistory turns the rebalance history off (docs/history.md).
func noHistory(c *group.Config) { c.HistorySize = -1 }

var targets = []target{
	{"cohort-mem", func(t *testing.T) (string, func()) { return startCohort(t, memStore) }},
	{"cohort-disk", func(t *testing.T) (string, func()) { return startCohort(t, diskStore) }},
	// Only with COHORT_BENCH_TARGETS naming it (durability ceiling, issue 3).
	{"cohort-disk-nosync", func(t *testing.T) (string, func()) { return startCohort(t, diskNoSync) }},
	// Opt-in: the same coordinator with only 2 partitions, i.e. 2 event loops
	// (the "fixed pool of loops" alternative to one loop per partition).
	{"cohort-mem-2loops", func(t *testing.T) (string, func()) { return startCohortLoops(t, memStore, 2) }},
	// Opt-in: cohort with no metrics recorded, the peer of cohort-mem and
	// cohort-disk for the cost of metrics (COHORT_BENCH_BASE=cohort-mem-nometrics).
	{"cohort-mem-nometrics", func(t *testing.T) (string, func()) { return startCohortNode(t, memStore, 0, nil, true) }},
	{"cohort-disk-nometrics", func(t *testing.T) (string, func()) { return startCohortNode(t, diskStore, 0, nil, true) }},
	// Opt-in: cohort with no rebalance history recorded (group.Config
	// HistorySize negative), metrics on: the peer of cohort-mem and
	// cohort-disk for the cost of history (COHORT_BENCH_BASE=cohort-mem-nohistory).
	{"cohort-mem-nohistory", func(t *testing.T) (string, func()) { return startCohortNode(t, memStore, 0, noHistory, false) }},
	{"cohort-disk-nohistory", func(t *testing.T) (string, func()) { return startCohortNode(t, diskStore, 0, noHistory, false) }},
	// Opt-in: neither history nor metrics, the peer for their joint cost.
	{"cohort-mem-plain", func(t *testing.T) (string, func()) { return startCohortNode(t, memStore, 0, noHistory, true) }},
	{"cohort-disk-plain", func(t *testing.T) (string, func()) { return startCohortNode(t, diskStore, 0, noHistory, true) }},
	{"kfake", func(t *testing.T) (string, func()) {
		// kfake always listens on 127.0.0.1.
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		return c.ListenAddrs()[0], c.Close
	}},
}

// TestCompare runs the benchmark against cohort with the in-memory store,
// cohort with the embedded disk store, and franz-go's kfake, one after the
// other in the same process, and logs the tables (go test -v). It checks
// sanity only (every round converged with everyone assigned, throughput
// above zero); the numbers are reported, not asserted.
//
// COHORT_BENCH_TARGETS=cohort-mem,kfake restricts the targets and
// COHORT_BENCH_ONLY=rebalance|heartbeat|commit the measurements (e.g. for
// -cpuprofile), COHORT_BENCH_MEMBERS, _GROUPS, _COMMITTERS and _PARTITIONS
// (comma-separated counts) the cases, COHORT_BENCH_SECONDS the measured
// window of each throughput case (default 1); COHORT_BENCH_OUT=file also
// writes the markdown there; COHORT_BENCH_BASE=<target> compares against
// that target instead of kfake (cohort-mem-nometrics: the cost of metrics;
// cohort-mem-nohistory: of rebalance history; cohort-mem-plain: of both).
// Without COHORT_BENCH=1 (as in `go test ./...` and CI), or with -short, it
// runs a quick sanity version: no N=1000, short windows, one series. The
// figures in docs/benchmarks.md come from COHORT_BENCH=1.
func TestCompare(t *testing.T) {
	testwait.WallClock(t, "benchmark: cohort and its peer measured side by side")
	cfg := Defaults()
	cfg.Duration = time.Second
	cfg.RoundTimeout = 30 * time.Second
	quick := testing.Short() || os.Getenv("COHORT_BENCH") != "1"
	if quick {
		cfg.Members = []int{10, 100}
		cfg.Duration = 300 * time.Millisecond
		cfg.Committers = []int{16}
	}
	cfg.Logf = t.Logf
	cfg.Only = os.Getenv("COHORT_BENCH_ONLY")
	for env, dst := range map[string]*[]int{
		"COHORT_BENCH_MEMBERS":    &cfg.Members,
		"COHORT_BENCH_GROUPS":     &cfg.HeartbeatGroups,
		"COHORT_BENCH_COMMITTERS": &cfg.Committers,
		"COHORT_BENCH_PARTITIONS": &cfg.PartitionsPerCommit,
	} {
		if v := os.Getenv(env); v != "" {
			xs, err := ParseCounts(v)
			if err != nil {
				t.Fatalf("%s: %v", env, err)
			}
			*dst = xs
		}
	}
	// Clients and the in-process targets share this process's descriptors.
	if err := RaiseFileLimit(2 * FilesNeeded(cfg)); err != nil {
		t.Skip(err)
	}
	if v := os.Getenv("COHORT_BENCH_SECONDS"); v != "" {
		xs, err := ParseCounts(v)
		if err != nil || len(xs) != 1 || xs[0] > 60 {
			t.Fatalf("COHORT_BENCH_SECONDS=%q: want one count of at most 60", v)
		}
		cfg.Duration = time.Duration(xs[0]) * time.Second
	}
	only := os.Getenv("COHORT_BENCH_TARGETS")
	repeat := 3
	if quick {
		repeat = 1
	}
	if v := os.Getenv("COHORT_BENCH_REPEAT"); v != "" {
		xs, err := ParseCounts(v)
		if err != nil || len(xs) != 1 {
			t.Fatalf("COHORT_BENCH_REPEAT=%q: want one count", v)
		}
		repeat = xs[0]
	}
	type running struct {
		name string
		cfg  Config
		runs []*Result
	}
	var rs []*running
	for _, tg := range targets {
		if only == "" && (tg.name == "cohort-disk-nosync" || tg.name == "cohort-mem-2loops" || strings.HasSuffix(tg.name, "-nometrics") ||
			strings.HasSuffix(tg.name, "-nohistory") || strings.HasSuffix(tg.name, "-plain")) {
			continue // opt-in targets
		}
		if only != "" && !strings.Contains(","+only+",", ","+tg.name+",") {
			continue
		}
		addr, stop := tg.start(t)
		t.Cleanup(stop)
		c := cfg
		c.Bootstrap = addr
		rs = append(rs, &running{name: tg.name, cfg: c})
	}
	// Bounded: every case of every series against every target, each well
	// within its window plus a minute.
	budget := 5*time.Minute + time.Duration(repeat*len(cfg.Cases())*len(rs))*(cfg.Duration+time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	// Case by case, each against every target in turn, the whole series
	// repeated: a change in the machine's load from other processes falls
	// on all targets alike, and the median run of each is reported. Every
	// other series runs the targets in reverse order, so that none always
	// goes first (after the previous case's connections close) or last.
	start := time.Now()
	for rep := range repeat {
		for _, r := range rs {
			r.runs = append(r.runs, &Result{Target: r.name})
		}
		order := slices.Clone(rs)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range cfg.Cases() {
			for _, r := range order {
				rc := r.cfg
				rc.Prefix = fmt.Sprintf("bench-%s-%d", r.name, rep)
				if err := RunCase(ctx, rc, c, r.runs[rep]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("%d run(s) of %d cases against %d targets in %v", repeat, len(cfg.Cases()), len(rs), time.Since(start).Round(time.Millisecond))
	var results []*Result
	for _, r := range rs {
		for _, run := range r.runs {
			check(t, r.cfg, run)
		}
		results = append(results, Median(r.runs))
	}
	var sb strings.Builder
	for _, r := range results {
		r.WriteMarkdown(&sb)
	}
	// The comparison's base: kfake, or the target COHORT_BENCH_BASE names.
	baseName := cmp.Or(os.Getenv("COHORT_BENCH_BASE"), "kfake")
	var base *Result
	var others []*Result
	for _, r := range results {
		if r.Target == baseName {
			base = r
		} else {
			others = append(others, r)
		}
	}
	if base != nil && len(others) > 0 {
		WriteComparison(&sb, base, others...)
		if repeat > 1 {
			byName := map[string][]*Result{}
			var baseRuns []*Result
			for _, r := range rs {
				if r.name == baseName {
					baseRuns = r.runs
				} else {
					byName[r.name] = r.runs
				}
			}
			WritePaired(&sb, baseName, baseRuns, byName)
		}
	}
	t.Log("\n" + sb.String())
	if out := os.Getenv("COHORT_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func check(t *testing.T, cfg Config, r *Result) {
	t.Helper()
	if cfg.Only != "" {
		return
	}
	if len(r.Rebalance) != len(cfg.Members) {
		t.Errorf("%d rebalance results for %v", len(r.Rebalance), cfg.Members)
	}
	for _, x := range r.Rebalance {
		if x.Initial <= 0 || x.Rejoin <= 0 || x.InitialGens < 1 || x.RejoinGens < 1 {
			t.Errorf("rebalance: %+v", x)
		}
	}
	if len(r.Heartbeat) != len(cfg.HeartbeatGroups) || len(r.Commit) != len(cfg.Committers)*len(cfg.PartitionsPerCommit) {
		t.Errorf("%d heartbeat and %d commit results", len(r.Heartbeat), len(r.Commit))
	}
	for _, x := range append(append([]Throughput(nil), r.Heartbeat...), r.Commit...) {
		// Done, not OK: a quick run's 100 ms window may hold no whole
		// request on a loaded machine; what matters here is that they
		// are answered.
		if x.Done <= 0 {
			t.Errorf("%s: nothing answered: %+v", x.Kind, x)
		}
		if _, measured := processCPU(); measured && x.OK > 0 && x.CPUPerOp() <= 0 {
			t.Errorf("%s: no CPU time measured: %+v", x.Kind, x)
		}
	}
}

// TestSmoke is a quick run of every measurement against cohort with the
// in-memory store.
func TestSmoke(t *testing.T) {
	addr, stop := startCohort(t, memStore)
	defer stop()
	cfg := Config{
		Bootstrap:           addr,
		Members:             []int{3},
		HeartbeatMembers:    4,
		HeartbeatGroups:     []int{1, 2},
		Committers:          []int{2},
		PartitionsPerCommit: []int{3},
		Duration:            100 * time.Millisecond,
		RoundTimeout:        10 * time.Second,
	}
	r, err := Run(context.Background(), "smoke", cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Validate()
	check(t, cfg, r)
	var sb strings.Builder
	r.WriteMarkdown(&sb)
	WriteComparison(&sb, r, r)
	if !strings.Contains(sb.String(), "| 3 |") {
		t.Errorf("table:\n%s", sb.String())
	}
	// The same load through the members' and committers' kgo clients.
	kc := cfg
	kc.Client, kc.Members = "kgo", nil
	kr, err := Run(context.Background(), "smoke-kgo", kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range append(kr.Heartbeat, kr.Commit...) {
		if x.Done <= 0 || x.Errors != 0 {
			t.Errorf("kgo client: %+v", x)
		}
	}
	if _, err := Run(context.Background(), "x", Config{Bootstrap: addr, Only: "nope"}); err == nil {
		t.Error("bad --only accepted")
	}
}

// TestLoadCountsRequestsOutsideTheWindow: a request that outlasts the
// measured window is not a throughput figure (OK), but it is counted as
// answered (Done), which is what a quick run checks: on a loaded CI
// machine a TLS and SCRAM handshake outlasted a 200 ms window and the
// quick run reported "nothing succeeded".
func TestLoadCountsRequestsOutsideTheWindow(t *testing.T) {
	const window = 10 * time.Millisecond
	tp, err := load(t.Context(), 2, window, func(ctx context.Context, w int) (bool, error) {
		select {
		case <-time.After(5 * window): // every request overruns the window
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if tp.OK != 0 || tp.Done != 2 {
		t.Fatalf("OK %d, Done %d: want 0 in the window and the 2 workers' requests answered", tp.OK, tp.Done)
	}
}

package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

// target is one coordinator under test, started in-process on 127.0.0.1.
type target struct {
	name  string
	start func(t *testing.T) (addr string, stop func())
}

func startCohort(t *testing.T, durable bool) (string, func()) {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	nc := node.Config{
		Listen: "127.0.0.1:0",
		Group:  cfg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if durable {
		nc.DataDir = t.TempDir()
	} else {
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
	}
}

var targets = []target{
	{"cohort-mem", func(t *testing.T) (string, func()) { return startCohort(t, false) }},
	{"cohort-disk", func(t *testing.T) (string, func()) { return startCohort(t, true) }},
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
// -cpuprofile); COHORT_BENCH_OUT=file also writes the markdown there.
// -short drops N=1000 and shortens the windows.
func TestCompare(t *testing.T) {
	cfg := Defaults()
	cfg.Duration = 2 * time.Second
	cfg.RoundTimeout = 30 * time.Second
	if testing.Short() {
		cfg.Members = []int{10, 100}
		cfg.Duration = 300 * time.Millisecond
		cfg.Committers = []int{16}
	}
	cfg.Logf = t.Logf
	cfg.Only = os.Getenv("COHORT_BENCH_ONLY")
	// Clients and the in-process targets share this process's descriptors.
	if err := RaiseFileLimit(2 * FilesNeeded(cfg)); err != nil {
		t.Skip(err)
	}
	only := os.Getenv("COHORT_BENCH_TARGETS")
	type running struct {
		cfg Config
		res *Result
	}
	var rs []running
	for _, tg := range targets {
		if only != "" && !strings.Contains(","+only+",", ","+tg.name+",") {
			continue
		}
		addr, stop := tg.start(t)
		t.Cleanup(stop)
		c := cfg
		c.Prefix = "bench-" + tg.name
		c.Bootstrap = addr
		rs = append(rs, running{c, &Result{Target: tg.name}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Case by case, each against every target in turn: a change in the
	// machine's load from other processes falls on all targets alike.
	for _, c := range cfg.Cases() {
		for _, r := range rs {
			if err := RunCase(ctx, r.cfg, c, r.res); err != nil {
				t.Fatal(err)
			}
		}
	}
	var results []*Result
	for _, r := range rs {
		check(t, r.cfg, r.res)
		results = append(results, r.res)
	}
	var sb strings.Builder
	for _, r := range results {
		r.WriteMarkdown(&sb)
	}
	var base *Result
	var others []*Result
	for _, r := range results {
		if r.Target == "kfake" {
			base = r
		} else {
			others = append(others, r)
		}
	}
	if base != nil && len(others) > 0 {
		WriteComparison(&sb, base, others...)
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
		if x.OK <= 0 {
			t.Errorf("%s: nothing answered: %+v", x.Kind, x)
		}
	}
}

// TestSmoke is a quick run of every measurement against cohort with the
// in-memory store.
func TestSmoke(t *testing.T) {
	addr, stop := startCohort(t, false)
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
	if _, err := Run(context.Background(), "x", Config{Bootstrap: addr, Only: "nope"}); err == nil {
		t.Error("bad --only accepted")
	}
}

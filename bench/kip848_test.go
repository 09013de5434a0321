package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/group"
)

// kip848Targets are the targets of TestKIP848Compare, each started with the
// consumer-protocol heartbeat interval given. rebalance is the longest of
// the shorter intervals a target may answer while the group is not Stable
// (cohort's ConsumerRebalanceHeartbeatInterval, at its default; 0: none):
// cohort answers from ConsumerRebalanceHeartbeatMin up to it, so the last
// answer of a convergence may carry any interval in that range.
var kip848Targets = []struct {
	name      string
	rebalance time.Duration
	start     func(t *testing.T, interval time.Duration) (string, func())
}{
	{"cohort-mem", group.Defaults().ConsumerRebalanceHeartbeatInterval, func(t *testing.T, iv time.Duration) (string, func()) {
		return startCohortWith(t, memStore, 0, func(c *group.Config) { c.ConsumerHeartbeatInterval = iv })
	}},
	{"cohort-disk", group.Defaults().ConsumerRebalanceHeartbeatInterval, func(t *testing.T, iv time.Duration) (string, func()) {
		return startCohortWith(t, diskStore, 0, func(c *group.Config) { c.ConsumerHeartbeatInterval = iv })
	}},
	// Opt-in (only when named in COHORT_BENCH_TARGETS): cohort-mem with the
	// rebalance history off (group.Config.HistorySize -1), the peer that
	// shows what recording one history event per group-epoch bump costs a
	// join burst.
	{"cohort-mem-nohistory", group.Defaults().ConsumerRebalanceHeartbeatInterval, func(t *testing.T, iv time.Duration) (string, func()) {
		return startCohortWith(t, memStore, 0, func(c *group.Config) { c.ConsumerHeartbeatInterval = iv; noHistory(c) })
	}},
	{"kfake", 0, func(t *testing.T, iv time.Duration) (string, func()) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{
			"group.consumer.heartbeat.interval.ms": strconv.FormatInt(iv.Milliseconds(), 10),
		}))
		if err != nil {
			t.Fatal(err)
		}
		return c.ListenAddrs()[0], c.Close
	}},
}

// TestKIP848Compare measures the consumer group protocol (KIP-848) against
// cohort (memory and disk store) and kfake in the same run: time for N new
// members to converge, and ConsumerGroupHeartbeats per second of a stable
// group. Series interleave the targets (every other one in reverse order);
// medians are reported. It checks the outcome (converged, Stable in
// ConsumerGroupDescribe, heartbeats answered without error), not the
// figures.
//
// With COHORT_BENCH=1: N = 10, 100, 1000 on a 1000-partition topic, three
// series, 1 s heartbeat windows. Otherwise (go test ./...) a quick run: N =
// 10 and 50, one series. COHORT_BENCH_INTERVAL_MS sets every target's
// heartbeat interval (default 5000, both servers' default);
// COHORT_BENCH_MEMBERS, _TARGETS, _REPEAT, _SECONDS, _ONLY (converge or
// heartbeat) and _OUT as in TestCompare.
func TestKIP848Compare(t *testing.T) {
	cfg := KIP848Config{Members: []int{10, 100, 1000}, Partitions: 1000, Duration: time.Second, Logf: t.Logf}
	interval, repeat := 5*time.Second, 3
	quick := testing.Short() || os.Getenv("COHORT_BENCH") != "1"
	if quick {
		cfg.Members, cfg.Partitions, cfg.HeartbeatMembers = []int{10, 50}, 100, 50
		cfg.Duration, interval, repeat = 200*time.Millisecond, 100*time.Millisecond, 1
	}
	envCount := func(name string) (int, bool) {
		v := os.Getenv(name)
		if v == "" {
			return 0, false
		}
		xs, err := ParseCounts(v)
		if err != nil || len(xs) != 1 {
			t.Fatalf("%s=%q: want one count", name, v)
		}
		return xs[0], true
	}
	if v := os.Getenv("COHORT_BENCH_MEMBERS"); v != "" {
		xs, err := ParseCounts(v)
		if err != nil {
			t.Fatalf("COHORT_BENCH_MEMBERS: %v", err)
		}
		cfg.Members = xs
	}
	if ms, ok := envCount("COHORT_BENCH_INTERVAL_MS"); ok {
		interval = time.Duration(ms) * time.Millisecond
	}
	if n, ok := envCount("COHORT_BENCH_REPEAT"); ok {
		repeat = n
	}
	if s, ok := envCount("COHORT_BENCH_SECONDS"); ok && s <= 60 {
		cfg.Duration = time.Duration(s) * time.Second
	}
	only := os.Getenv("COHORT_BENCH_ONLY")
	names := os.Getenv("COHORT_BENCH_TARGETS")
	type running struct {
		name      string
		addr      string
		rebalance time.Duration
		runs      []*KIP848Result
	}
	var rs []*running
	for _, tg := range kip848Targets {
		if names == "" && strings.HasSuffix(tg.name, "-nohistory") {
			continue // opt-in
		}
		if names != "" && !strings.Contains(","+names+",", ","+tg.name+",") {
			continue
		}
		addr, stop := tg.start(t, interval)
		t.Cleanup(stop)
		rs = append(rs, &running{name: tg.name, addr: addr, rebalance: tg.rebalance})
	}
	// Bounded: every round well within its timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(repeat*len(rs)*(len(cfg.Members)+1))*2*time.Minute)
	defer cancel()
	start := time.Now()
	for rep := range repeat {
		order := slices.Clone(rs)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, r := range rs {
			r.runs = append(r.runs, &KIP848Result{Target: r.name})
		}
		for _, n := range append(slices.Clone(cfg.Members), 0) { // 0: the heartbeat load
			for _, r := range order {
				c := cfg
				c.Bootstrap, c.Prefix = r.addr, fmt.Sprintf("kip848-%s-%d", r.name, rep)
				res := r.runs[rep]
				switch {
				case n > 0 && only != "heartbeat":
					cv, err := ConvergeKIP848(ctx, c, n)
					if err != nil {
						t.Fatalf("%s, %d members: %v", r.name, n, err)
					}
					t.Logf("%s: %d members converged in %v (%d heartbeats, %d interval waits, epoch %d, interval %v)", r.name, n, cv.Elapsed, cv.Heartbeats, cv.Waits, cv.Epoch, cv.Interval)
					if cv.Interval != interval && (r.rebalance >= interval || cv.Interval > r.rebalance ||
						cv.Interval < group.Defaults().ConsumerRebalanceHeartbeatMin) {
						t.Errorf("%s answered a heartbeat interval of %v, want %v", r.name, cv.Interval, interval)
					}
					res.Convergence = append(res.Convergence, cv)
				case n == 0 && only != "converge":
					hb, err := HeartbeatKIP848(ctx, c)
					if err != nil {
						t.Fatalf("%s, heartbeats: %v", r.name, err)
					}
					if hb.OK <= 0 || hb.Errors != 0 {
						t.Errorf("%s: heartbeats %+v", r.name, hb)
					}
					t.Logf("%s: %s ConsumerGroupHeartbeats/s", r.name, count(hb.PerSec()))
					res.Heartbeat = hb
				}
			}
		}
	}
	t.Logf("%d series against %d targets in %v", repeat, len(rs), time.Since(start).Round(time.Millisecond))
	byName := map[string][]*KIP848Result{}
	var order []string
	for _, r := range rs {
		byName[r.name] = r.runs
		order = append(order, r.name)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "heartbeat interval %v, %d-partition topic, %d series (medians)\n\n", interval, cfg.Partitions, repeat)
	writeKIP848(&sb, order, byName)
	t.Log("\n" + sb.String())
	if out := os.Getenv("COHORT_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// writeKIP848 writes the medians of every target's series as a markdown
// table, with each cohort target's ratio to kfake (convergence:
// cohort/kfake, lower is better; heartbeats: cohort/kfake, higher is
// better).
func writeKIP848(w io.Writer, order []string, runs map[string][]*KIP848Result) {
	medDur := func(xs []time.Duration) time.Duration {
		if len(xs) == 0 {
			return 0
		}
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	type row struct {
		label string
		val   map[string]float64
		fmt   func(float64) string
	}
	var rows []row
	if rs := runs[order[0]]; len(rs) > 0 {
		for i, c := range rs[0].Convergence {
			r := row{label: fmt.Sprintf("convergence, %d members", c.Members), val: map[string]float64{},
				fmt: func(v float64) string { return ms(time.Duration(v)) }}
			plain := func(v float64) string { return fmt.Sprintf("%.0f", v) }
			h := row{label: fmt.Sprintf("heartbeats to converge, %d members", c.Members), val: map[string]float64{}, fmt: plain}
			wt := row{label: fmt.Sprintf("interval waits short of a share, %d members", c.Members), val: map[string]float64{}, fmt: plain}
			for name, rs := range runs {
				var ds, hs, ws []time.Duration
				for _, x := range rs {
					if i < len(x.Convergence) {
						ds = append(ds, x.Convergence[i].Elapsed)
						hs = append(hs, time.Duration(x.Convergence[i].Heartbeats))
						ws = append(ws, time.Duration(x.Convergence[i].Waits))
					}
				}
				r.val[name], h.val[name], wt.val[name] = float64(medDur(ds)), float64(medDur(hs)), float64(medDur(ws))
			}
			rows = append(rows, r, h, wt)
		}
		if rs[0].Heartbeat.Workers > 0 {
			r := row{label: fmt.Sprintf("ConsumerGroupHeartbeats/s, %d members", rs[0].Heartbeat.Workers), val: map[string]float64{}, fmt: count}
			for name, rs := range runs {
				var xs []time.Duration // per-second rates, as durations to reuse medDur
				for _, x := range rs {
					xs = append(xs, time.Duration(x.Heartbeat.PerSec()))
				}
				r.val[name] = float64(medDur(xs))
			}
			rows = append(rows, r)
		}
	}
	var others []string
	for _, n := range order {
		if n != "kfake" {
			others = append(others, n)
		}
	}
	_, haveBase := runs["kfake"]
	fmt.Fprintf(w, "| measurement | %s |", strings.Join(order, " | "))
	if haveBase {
		for _, n := range others {
			fmt.Fprintf(w, " %s / kfake |", n)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|"+strings.Repeat("---:|", len(order)))
	if haveBase {
		fmt.Fprint(w, strings.Repeat("---:|", len(others)))
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |", r.label)
		for _, n := range order {
			fmt.Fprintf(w, " %s |", r.fmt(r.val[n]))
		}
		if haveBase {
			for _, n := range others {
				if b := r.val["kfake"]; b > 0 {
					fmt.Fprintf(w, " %.2f× |", r.val[n]/b)
				} else {
					fmt.Fprint(w, " – |")
				}
			}
		}
		fmt.Fprintln(w)
	}
}

// TestKIP848Moves applies the same seeded sequence of membership changes
// (MoveSequence: one member joins or one leaves gracefully, at random) to
// a stable consumer group on cohort and on kfake, both with the `uniform`
// server-side assignor, and counts after every change the partitions that
// changed owner (RunMoves). Two variants: every member subscribed to every
// topic, and heterogeneous subscriptions (each member a random subset).
//
// It checks, at every step: homogeneous: cohort's plan within one
// partition per member and moving exactly the minimum for its previous
// layout (at least the minimum when COHORT_BENCH_MAXCHANGE makes a step
// change several members); kfake's plan, when within one, at or above its
// minimum, and cohort's moves at or below kfake's when both had the same
// minimum (the layouts before a step may differ between the two, and with
// them the minimum); kfake's steps with a wider spread are reported, not
// compared. Heterogeneous: cohort's sum of squared per-member counts at or
// below kfake's (cohort's is the optimum); moves are reported, not
// compared.
//
// With COHORT_BENCH=1: 100 members, 20 steps, one 1,000-partition topic,
// and 100 members on ten 100-partition topics for the heterogeneous
// variant. Otherwise a quick run: 10 members and one 100-partition topic,
// 8 members on three 20-partition topics. COHORT_BENCH_MEMBERS (one count),
// COHORT_BENCH_STEPS, COHORT_BENCH_MAXCHANGE (members per step, 1..n),
// COHORT_BENCH_SEED and COHORT_BENCH_OUT override.
func TestKIP848Moves(t *testing.T) {
	type variant struct {
		name string
		cfg  MovesConfig
	}
	vs := []variant{
		{"homogeneous", MovesConfig{Members: 10, Topics: 1, Partitions: 100}},
		{"heterogeneous", MovesConfig{Members: 8, Topics: 3, Partitions: 20, Hetero: true}},
	}
	if os.Getenv("COHORT_BENCH") == "1" && !testing.Short() {
		vs[0].cfg = MovesConfig{Members: 100, Topics: 1, Partitions: 1000}
		vs[1].cfg = MovesConfig{Members: 100, Topics: 10, Partitions: 100, Hetero: true}
	}
	seed := uint64(848)
	for _, v := range []struct {
		env string
		set func(n int)
	}{
		{"COHORT_BENCH_MEMBERS", func(n int) { vs[0].cfg.Members, vs[1].cfg.Members = n, n }},
		{"COHORT_BENCH_STEPS", func(n int) { vs[0].cfg.Steps, vs[1].cfg.Steps = n, n }},
		{"COHORT_BENCH_MAXCHANGE", func(n int) { vs[0].cfg.MaxChange, vs[1].cfg.MaxChange = n, n }},
		{"COHORT_BENCH_SEED", func(n int) { seed = uint64(n) }},
	} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want a positive count", v.env, s)
			}
			v.set(n)
		}
	}
	var addrs [2]string
	for i, name := range []string{"cohort-mem", "kfake"} {
		for _, tg := range kip848Targets {
			if tg.name == name {
				addr, stop := tg.start(t, 5*time.Second)
				t.Cleanup(stop)
				addrs[i] = addr
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var sb strings.Builder
	for _, v := range vs {
		var res [2]*MovesResult
		for i, name := range []string{"cohort", "kfake"} {
			c := v.cfg
			c.Bootstrap, c.Seed, c.Logf = addrs[i], seed, t.Logf
			c.Prefix = fmt.Sprintf("moves-%s-%s", v.name, name)
			start := time.Now()
			r, err := RunMoves(ctx, name, c)
			if err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			t.Logf("%s, %s: %d steps in %v", v.name, name, len(r.Steps), time.Since(start).Round(time.Millisecond))
			res[i] = r
		}
		co, kf := res[0], res[1]
		for i := range co.Steps {
			cs, ks := co.Steps[i], kf.Steps[i]
			if v.cfg.Hetero {
				if cs.SumSq > ks.SumSq {
					t.Errorf("%s step %d: cohort's Σcount² %d above kfake's %d", v.name, i+1, cs.SumSq, ks.SumSq)
				}
				continue
			}
			single := cs.Joined+cs.Left == 1
			if cs.Spread > 1 || cs.Moves < cs.Min || single && cs.Moves != cs.Min {
				t.Errorf("%s step %d: cohort spread %d, moved %d, minimum %d", v.name, i+1, cs.Spread, cs.Moves, cs.Min)
			}
			switch {
			case ks.Spread > 1:
				t.Logf("%s step %d: kfake's plan has spread %d: not compared", v.name, i+1, ks.Spread)
			case ks.Moves < ks.Min:
				t.Errorf("%s step %d: kfake moved %d, below its minimum %d: the minimum is wrong", v.name, i+1, ks.Moves, ks.Min)
			case cs.Min == ks.Min && cs.Moves > ks.Moves:
				t.Errorf("%s step %d: cohort moved %d, kfake %d", v.name, i+1, cs.Moves, ks.Moves)
			}
		}
		fmt.Fprintf(&sb, "%s: %d members to start, %d topic(s) × %d partitions, seed %d\n\n", v.name, v.cfg.Members, v.cfg.Topics, v.cfg.Partitions, seed)
		writeMoves(&sb, co, kf)
		fmt.Fprintln(&sb)
	}
	t.Log("\n" + sb.String())
	if out := os.Getenv("COHORT_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// writeMoves writes a moves run of cohort and kfake as a markdown table,
// one row per step and a total.
func writeMoves(w io.Writer, co, kf *MovesResult) {
	minStr := func(n int) string {
		if n < 0 {
			return "–"
		}
		return strconv.Itoa(n)
	}
	fmt.Fprintln(w, "| step | change | members | cohort moved | kfake moved | minimum (cohort / kfake) | spread (cohort / kfake) | Σcount² (cohort / kfake) |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|")
	for i := range co.Steps {
		cs, ks := co.Steps[i], kf.Steps[i]
		change := fmt.Sprintf("+%d", cs.Joined)
		if cs.Left > 0 {
			change = fmt.Sprintf("−%d", cs.Left)
		}
		fmt.Fprintf(w, "| %d | %s | %d | %d | %d | %s / %s | %d / %d | %d / %d |\n", i+1, change, cs.Members, cs.Moves, ks.Moves,
			minStr(cs.Min), minStr(ks.Min), cs.Spread, ks.Spread, cs.SumSq, ks.SumSq)
	}
	cm, cmin := co.Total()
	km, kmin := kf.Total()
	maxSpread := func(r *MovesResult) int {
		s := 0
		for _, st := range r.Steps {
			s = max(s, st.Spread)
		}
		return s
	}
	fmt.Fprintf(w, "| total | | | %d | %d | %s / %s | max %d / %d | |\n", cm, km, minStr(cmin), minStr(kmin), maxSpread(co), maxSpread(kf))
}

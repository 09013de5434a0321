package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func commitRun(target string, rates ...int64) *Result {
	r := &Result{Target: target}
	for i, n := range rates {
		r.Commit = append(r.Commit, Throughput{Kind: "commit", Workers: 16 << (4 * i), Partitions: 1, Window: time.Second, OK: n})
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-3 }

func TestPairSeries(t *testing.T) {
	// Series i pairs target[i] with base[i]; the second case is missing
	// from the target's last series.
	base := []*Result{commitRun("kfake", 100, 1000), commitRun("kfake", 200, 1000), commitRun("kfake", 100, 1000)}
	target := []*Result{commitRun("x", 200, 1100), commitRun("x", 100, 900), commitRun("x", 100)}
	ps := PairSeries(target, base)
	if len(ps) != 2 {
		t.Fatalf("%d cases, want 2: %+v", len(ps), ps)
	}
	p := ps[0]
	if p.Case != "commits/s, 16 committers × 1 partitions" || len(p.Ratios) != 3 || p.Ratios[0] != 2 || p.Ratios[1] != 0.5 || p.Ratios[2] != 1 {
		t.Fatalf("first case: %+v", p)
	}
	// 2 × 0.5 × 1: geometric mean 1; two of three at or above 1.
	if !near(p.GeoMean, 1) || p.AtLeast != 2 {
		t.Fatalf("first case: geometric mean %v, %d at least 1", p.GeoMean, p.AtLeast)
	}
	// logs ln2, -ln2, 0: sd ln2, se ln2/√3, t(2) = 4.303.
	h := 4.303 * math.Ln2 / math.Sqrt(3)
	if !near(p.Low, math.Exp(-h)) || !near(p.High, math.Exp(h)) {
		t.Fatalf("first case: interval %v–%v, want %v–%v", p.Low, p.High, math.Exp(-h), math.Exp(h))
	}
	q := ps[1]
	if q.Case != "commits/s, 256 committers × 1 partitions" || len(q.Ratios) != 2 || !near(q.GeoMean, math.Sqrt(1.1*0.9)) || q.AtLeast != 1 {
		t.Fatalf("second case: %+v", q)
	}
}

func TestGeoMeanCI(t *testing.T) {
	if m, lo, hi := geoMeanCI([]float64{1.2}); m != 1.2 || lo != 1.2 || hi != 1.2 {
		t.Fatalf("one value: %v %v–%v", m, lo, hi)
	}
	// Identical ratios: no spread, the interval is the value.
	if m, lo, hi := geoMeanCI([]float64{1.1, 1.1, 1.1, 1.1}); !near(m, 1.1) || !near(lo, 1.1) || !near(hi, 1.1) {
		t.Fatalf("identical values: %v %v–%v", m, lo, hi)
	}
	// More series of the same spread give a narrower interval.
	few := []float64{0.9, 1.1, 1.0, 1.2}
	many := append(append(append([]float64{}, few...), few...), few...)
	_, l1, h1 := geoMeanCI(few)
	_, l2, h2 := geoMeanCI(many)
	if !(h2-l2 < h1-l1) || !(l1 < 1 && 1 < h1) {
		t.Fatalf("interval of 4: %v–%v, of 12: %v–%v", l1, h1, l2, h2)
	}
	if tQuantile975(1) != 12.706 || tQuantile975(30) != 2.042 || tQuantile975(100) != 1.96 {
		t.Fatal("t table")
	}
}

func TestWritePaired(t *testing.T) {
	base := []*Result{commitRun("kfake", 100), commitRun("kfake", 100)}
	var sb strings.Builder
	WritePaired(&sb, "kfake", base, map[string][]*Result{"cohort-disk": {commitRun("cohort-disk", 110), commitRun("cohort-disk", 90)}})
	out := sb.String()
	for _, want := range []string{"| cohort-disk | commits/s, 16 committers × 1 partitions | 2 | 0.995× |", "| 1 of 2 | 1.10 0.90 |"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in\n%s", want, out)
		}
	}
}

// Cases that differ only in partitions per commit (or groups) keep apart.
func TestPairSeriesCaseNames(t *testing.T) {
	run := func(target string) *Result {
		return &Result{Target: target,
			Heartbeat: []Throughput{{Workers: 200, Groups: 1, Window: time.Second, OK: 10}, {Workers: 200, Groups: 10, Window: time.Second, OK: 10}},
			Commit:    []Throughput{{Workers: 16, Partitions: 1, Window: time.Second, OK: 10}, {Workers: 16, Partitions: 50, Window: time.Second, OK: 10}}}
	}
	ps := PairSeries([]*Result{run("x")}, []*Result{run("kfake")})
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p.Case] {
			t.Fatalf("two cases named %q", p.Case)
		}
		seen[p.Case] = true
	}
	if len(seen) != 4 {
		t.Fatalf("%d cases, want 4: %v", len(seen), seen)
	}
}

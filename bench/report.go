package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteMarkdown writes r as markdown tables.
func (r *Result) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "### %s\n\n", r.Target)
	if len(r.Rebalance) > 0 {
		fmt.Fprintln(w, "| members | initial rebalance | generations | rejoin (+1 member) | generations |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
		for _, x := range r.Rebalance {
			fmt.Fprintf(w, "| %d | %s | %d | %s | %d |\n", x.Members, ms(x.Initial), x.InitialGens, ms(x.Rejoin), x.RejoinGens)
		}
		fmt.Fprintln(w)
	}
	if len(r.Heartbeat) > 0 {
		fmt.Fprintln(w, "| heartbeating members | groups | heartbeats/s | p50 | p99 | errors | CPU/request |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.Heartbeat {
			fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %d | %s |\n", x.Workers, x.Groups, count(x.PerSec()), ms(x.P50), ms(x.P99), x.Errors, us(x.CPUPerOp()))
		}
		fmt.Fprintln(w)
	}
	if len(r.Commit) > 0 {
		fmt.Fprintln(w, "| committers | partitions/commit | commits/s | offsets/s | p50 | p99 | errors | CPU/request |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.Commit {
			fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %d | %s |\n", x.Workers, x.Partitions, count(x.PerSec()), count(x.OffsetsPerSec()), ms(x.P50), ms(x.P99), x.Errors, us(x.CPUPerOp()))
		}
		fmt.Fprintln(w)
	}
}

// WriteComparison writes one table with a column per result and, for each
// result other than base, its speed-up over base (latency: base/result;
// throughput: result/base; above 1 is better).
func WriteComparison(w io.Writer, base *Result, rs ...*Result) {
	var cols []*Result
	cols = append(cols, rs...)
	cols = append(cols, base)
	head := []string{"measurement"}
	for _, r := range cols {
		head = append(head, r.Target)
	}
	for _, r := range rs {
		head = append(head, r.Target+" vs "+base.Target)
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "|---|%s\n", strings.Repeat("---:|", len(head)-1))
	row := func(name string, val func(*Result) (float64, bool), format func(float64) string, higherBetter bool) {
		cells := []string{name}
		for _, r := range cols {
			v, ok := val(r)
			if !ok {
				cells = append(cells, "–")
				continue
			}
			cells = append(cells, format(v))
		}
		b, bok := val(base)
		for _, r := range rs {
			v, ok := val(r)
			if !ok || !bok || v == 0 || b == 0 {
				cells = append(cells, "–")
				continue
			}
			ratio := v / b
			if !higherBetter {
				ratio = b / v
			}
			cells = append(cells, fmt.Sprintf("%.2f×", ratio))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	msf := func(v float64) string { return ms(time.Duration(v)) }
	for i, x := range base.Rebalance {
		pick := func(f func(Rebalance) time.Duration) func(*Result) (float64, bool) {
			return func(r *Result) (float64, bool) {
				if i >= len(r.Rebalance) {
					return 0, false
				}
				return float64(f(r.Rebalance[i])), true
			}
		}
		row(fmt.Sprintf("rebalance, %d members: initial", x.Members), pick(func(r Rebalance) time.Duration { return r.Initial }), msf, false)
		row(fmt.Sprintf("rebalance, %d members: rejoin of 1 more", x.Members), pick(func(r Rebalance) time.Duration { return r.Rejoin }), msf, false)
	}
	for i, x := range base.Heartbeat {
		row(fmt.Sprintf("heartbeats/s, %d members in %d group(s)", x.Workers, x.Groups), func(r *Result) (float64, bool) {
			if i >= len(r.Heartbeat) {
				return 0, false
			}
			return r.Heartbeat[i].PerSec(), true
		}, count, true)
	}
	for i, x := range base.Commit {
		row(fmt.Sprintf("commits/s, %d committers × %d partitions", x.Workers, x.Partitions), func(r *Result) (float64, bool) {
			if i >= len(r.Commit) {
				return 0, false
			}
			return r.Commit[i].PerSec(), true
		}, count, true)
		row(fmt.Sprintf("commit p99, %d committers × %d partitions", x.Workers, x.Partitions), func(r *Result) (float64, bool) {
			if i >= len(r.Commit) {
				return 0, false
			}
			return float64(r.Commit[i].P99), true
		}, msf, false)
		row(fmt.Sprintf("commit CPU/request, %d committers × %d partitions", x.Workers, x.Partitions), func(r *Result) (float64, bool) {
			if i >= len(r.Commit) || r.Commit[i].CPU == 0 {
				return 0, false
			}
			return float64(r.Commit[i].CPUPerOp()), true
		}, func(v float64) string { return us(time.Duration(v)) }, false)
	}
	fmt.Fprintln(w)
}

// us formats process CPU per request ("–" when not measured).
func us(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f µs", float64(d)/1e3)
}

func ms(d time.Duration) string {
	switch {
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
}

func count(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// ParseCounts parses a comma-separated list of positive integers ("10,100").
func ParseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q: empty list", s)
	}
	return out, nil
}

// Median combines repeated runs of the same cases against one target:
// each measurement is the median run's (by rebalance latency, or by
// requests per second). The runs must list the same cases in the same
// order.
func Median(runs []*Result) *Result {
	if len(runs) == 0 {
		return nil
	}
	out := &Result{Target: runs[0].Target}
	for i := range runs[0].Rebalance {
		var xs []Rebalance
		for _, r := range runs {
			if i < len(r.Rebalance) {
				xs = append(xs, r.Rebalance[i])
			}
		}
		slices.SortFunc(xs, func(a, b Rebalance) int { return cmp.Compare(a.Initial, b.Initial) })
		m := xs[len(xs)/2]
		slices.SortFunc(xs, func(a, b Rebalance) int { return cmp.Compare(a.Rejoin, b.Rejoin) })
		m.Rejoin, m.RejoinGens = xs[len(xs)/2].Rejoin, xs[len(xs)/2].RejoinGens
		out.Rebalance = append(out.Rebalance, m)
	}
	med := func(pick func(*Result) []Throughput) []Throughput {
		var res []Throughput
		for i := range pick(runs[0]) {
			var xs []Throughput
			for _, r := range runs {
				if ts := pick(r); i < len(ts) {
					xs = append(xs, ts[i])
				}
			}
			slices.SortFunc(xs, func(a, b Throughput) int { return cmp.Compare(a.PerSec(), b.PerSec()) })
			res = append(res, xs[len(xs)/2])
		}
		return res
	}
	out.Heartbeat = med(func(r *Result) []Throughput { return r.Heartbeat })
	out.Commit = med(func(r *Result) []Throughput { return r.Commit })
	return out
}

// Paired summarises one throughput case over series measured back to back:
// in series i, target and base ran the case one after the other, so a change
// in the machine's load falls on both. Ratio is target's rate over base's.
type Paired struct {
	Case    string
	Ratios  []float64 // one per series, in order
	GeoMean float64
	Low     float64 // 95% confidence interval of the geometric mean
	High    float64
	AtLeast int // series with a ratio of 1 or more
}

// PairSeries pairs the throughput cases of target's runs with base's
// (runs[i] of both are series i) and summarises each case. A case missing
// from either side in a series is left out of that series.
func PairSeries(target, base []*Result) []Paired {
	var out []Paired
	add := func(name func(Throughput) string, pick func(*Result) []Throughput) {
		if len(base) == 0 {
			return
		}
		for i, x := range pick(base[0]) {
			p := Paired{Case: name(x)}
			for s := 0; s < len(target) && s < len(base); s++ {
				ts, bs := pick(target[s]), pick(base[s])
				if i >= len(ts) || i >= len(bs) || bs[i].PerSec() == 0 || ts[i].PerSec() == 0 {
					continue
				}
				p.Ratios = append(p.Ratios, ts[i].PerSec()/bs[i].PerSec())
			}
			if len(p.Ratios) == 0 {
				continue
			}
			p.GeoMean, p.Low, p.High = geoMeanCI(p.Ratios)
			for _, r := range p.Ratios {
				if r >= 1 {
					p.AtLeast++
				}
			}
			out = append(out, p)
		}
	}
	add(func(x Throughput) string {
		return fmt.Sprintf("heartbeats/s, %d members in %d group(s)", x.Workers, x.Groups)
	}, func(r *Result) []Throughput { return r.Heartbeat })
	add(func(x Throughput) string {
		return fmt.Sprintf("commits/s, %d committers × %d partitions", x.Workers, x.Partitions)
	}, func(r *Result) []Throughput { return r.Commit })
	return out
}

// geoMeanCI is the geometric mean of xs (all > 0) and a 95% confidence
// interval for it: Student's t on the logarithms (the ratios of noisy rates
// are closer to log-normal than to normal). With one value the interval is
// that value.
func geoMeanCI(xs []float64) (mean, low, high float64) {
	logs := make([]float64, len(xs))
	var sum float64
	for i, x := range xs {
		logs[i] = math.Log(x)
		sum += logs[i]
	}
	m := sum / float64(len(xs))
	if len(xs) < 2 {
		return math.Exp(m), math.Exp(m), math.Exp(m)
	}
	var ss float64
	for _, l := range logs {
		ss += (l - m) * (l - m)
	}
	se := math.Sqrt(ss/float64(len(xs)-1)) / math.Sqrt(float64(len(xs)))
	h := tQuantile975(len(xs)-1) * se
	return math.Exp(m), math.Exp(m - h), math.Exp(m + h)
}

// tQuantile975 is the 97.5% quantile of Student's t with df degrees of
// freedom (two-sided 95%), from the standard table; 1.96 beyond 30.
func tQuantile975(df int) float64 {
	table := [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df >= 1 && df <= len(table) {
		return table[df-1]
	}
	return 1.96
}

// WritePaired writes, for each target, the per-series ratios of its rates
// to base's with their geometric mean and 95% confidence interval.
func WritePaired(w io.Writer, baseName string, base []*Result, targets map[string][]*Result) {
	names := slices.Sorted(maps.Keys(targets))
	fmt.Fprintf(w, "Paired series (each target and %s back to back; ratio = target / %s):\n\n", baseName, baseName)
	fmt.Fprintln(w, "| target | case | series | geometric mean | 95% CI | series ≥ 1 | ratios |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---|")
	for _, name := range names {
		for _, p := range PairSeries(targets[name], base) {
			rs := make([]string, len(p.Ratios))
			for i, r := range p.Ratios {
				rs[i] = fmt.Sprintf("%.2f", r)
			}
			fmt.Fprintf(w, "| %s | %s | %d | %.3f× | %.3f–%.3f | %d of %d | %s |\n",
				name, p.Case, len(p.Ratios), p.GeoMean, p.Low, p.High, p.AtLeast, len(p.Ratios), strings.Join(rs, " "))
		}
	}
	fmt.Fprintln(w)
}

package group

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/catalog"
)

// plainTopics hides catalog.Catalog's Sorted: a Topics that only ranges.
type plainTopics struct{ Topics }

// randomRegex builds a regex of topic-name-like pieces from rnd.
func randomRegex(rnd *rand.Rand) string {
	pieces := []string{"a", "b", "-", `\.`, "ab", ".*", ".", "[a-b]", "[0-9]+", "(a|b-)", "x?", "(ab)*", "0"}
	alts := make([]string, 1+rnd.IntN(4))
	for i := range alts {
		var b strings.Builder
		for range 1 + rnd.IntN(5) {
			b.WriteString(pieces[rnd.IntN(len(pieces))])
		}
		alts[i] = b.String()
	}
	return strings.Join(alts, "|")
}

// randomName is a topic name of 1 to 20 characters of "ab-.0".
func randomName(rnd *rand.Rand) string {
	b := make([]byte, 1+rnd.IntN(20))
	for i := range b {
		b[i] = "ab-.0"[rnd.IntN(5)]
	}
	return string(b)
}

// regexJobFor is the job the shard would make for expr over topics.
func regexJobFor(expr string, topics Topics) RegexJob {
	return RegexJob{Group: "g", Expr: expr, Version: topics.Version(), size: (*Shard)(nil).newRegexMatch(expr).size, topics: topics}
}

// stepAll runs j's steps with budget until it is done, and returns the
// result and the number of steps.
func stepAll(t *testing.T, j *RegexJob, budget int) (RegexResult, int) {
	t.Helper()
	for n := 1; ; n++ {
		if res, done := j.Step(budget); done {
			return res, n
		}
		if n > 1<<20 {
			t.Fatal("the job does not end")
		}
	}
}

// A matching run in slices (RegexJob.Step, any budget) gives what it gives
// run at once (Resolve), and what matching every name gives, over random
// catalogs and regexes; one made over a Topics without Sorted too. A change
// of the catalog between two slices does not reach the result: it is the
// catalog's at the first slice, labelled with that version, and the shard
// matches the change again as any catalog change (see
// TestRegexStepsKeepTheirCatalog).
func TestRegexStepsMatchResolve(t *testing.T) {
	sliced, changedMidway := 0, 0
	for seed := range uint64(300) {
		rnd := rand.New(rand.NewPCG(seed, 9))
		cat := catalog.New(catalog.Options{})
		for range rnd.IntN(120) {
			cat.Create(randomName(rnd), 1, nil) // a duplicate or colliding name fails: fine
		}
		expr := randomRegex(rnd)
		var topics Topics = cat
		if seed%3 == 0 {
			topics = plainTopics{cat}
		}
		re := regexp.MustCompile("^(?:" + expr + ")$")
		var want []string
		cat.Range(func(tp *catalog.Topic) bool {
			if re.MatchString(tp.Name) {
				want = append(want, tp.Name)
			}
			return true
		})
		version := cat.Version()
		whole := regexJobFor(expr, topics).Resolve()
		if !slices.Equal(whole.Topics, want) || whole.Version != version {
			t.Fatalf("seed %d, %q: Resolve gives %v at version %d, want %v at %d", seed, expr, whole.Topics, whole.Version, want, version)
		}

		budget := 1 + rnd.IntN(3*len(expr)*25)
		j := regexJobFor(expr, topics)
		first, done := j.Step(budget)
		changed := !done && rnd.IntN(2) == 0
		if changed { // the catalog changes part-way
			for range 1 + rnd.IntN(10) {
				cat.Create(randomName(rnd), 1, nil)
			}
			if ts := cat.List(); len(ts) > 0 {
				cat.Delete(ts[rnd.IntN(len(ts))].Name)
			}
		}
		res, steps := first, 1
		if !done {
			var more int
			res, more = stepAll(t, &j, budget)
			steps += more
		}
		if !slices.Equal(res.Topics, want) || res.Version != version || res.Group != "g" || res.Expr != expr {
			t.Fatalf("seed %d, %q, budget %d: %d steps give %v at version %d, want %v at %d", seed, expr, budget, steps, res.Topics, res.Version, want, version)
		}
		if steps > 1 {
			sliced++
		}
		if changed {
			changedMidway++
		}
	}
	if sliced < 100 || changedMidway < 50 {
		t.Fatalf("%d of the runs sliced, %d with a change part-way: the test exercises too little", sliced, changedMidway)
	}
}

// With the least budget, a step matches one topic: a job is cut between any
// two topics.
func TestRegexStepOneTopicAtLeast(t *testing.T) {
	cat := catalog.New(catalog.Options{})
	for i := range 50 {
		cat.Create(fmt.Sprintf("t-%02d", i), 1, nil)
	}
	j := regexJobFor("t-0.*", cat)
	res, steps := stepAll(t, &j, 1)
	if steps != 50 || len(res.Topics) != 10 {
		t.Fatalf("%d steps, %d topics matched; want 50 and 10", steps, len(res.Topics))
	}
	j = regexJobFor("t-0.*", cat)
	if _, steps = stepAll(t, &j, 0); steps != 50 {
		t.Fatalf("budget 0: %d steps, want 50", steps)
	}
	j = regexJobFor("t-0.*", cat)
	if _, steps = stepAll(t, &j, (*Shard)(nil).newRegexMatch("t-0.*").size*5*25); steps != 2 {
		t.Fatalf("a budget of 25 names: %d steps over 50, want 2", steps)
	}
}

// A topic created while a costly regex's matching is part-way is not in its
// result, which is the catalog's at its first slice, labelled with that
// version: the group's next heartbeat finds the regex's matches older than
// the catalog and makes another job, as for a change made before the job
// ran, which brings the new topic. Starting the matching again at each
// change would never end a long one over a catalog that changes more often.
func TestRegexStepsKeepTheirCatalog(t *testing.T) {
	h, cat := newCH(t, serviceTopics())
	h.holdRegex = true
	regex := costlyRegex(t, h, cat)
	r := h.cg(hb{member: "m1", regex: &regex, owned: tpset{}})
	if len(h.regexJobs) != 1 {
		t.Fatalf("%d jobs after the join, want 1", len(h.regexJobs))
	}
	j := h.regexJobs[0]
	h.regexJobs = nil
	before := cat.Version()
	if _, done := j.Step(1); done || !j.Started() {
		t.Fatal("one topic's step ended the job")
	}
	if _, err := cat.Create("service-001.new", 1, nil); err != nil {
		t.Fatal(err)
	}
	res, _ := stepAll(t, &j, RegexSliceBudget)
	if res.Version != before || len(res.Topics) != 200 || slices.Contains(res.Topics, "service-001.new") {
		t.Fatalf("result at version %d (catalog at %d before the change): %d topics, the new one in: %v",
			res.Version, before, len(res.Topics), slices.Contains(res.Topics, "service-001.new"))
	}
	h.s.RegexResolved(res)
	r = h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: tpset{}})
	if len(h.regexJobs) != 1 {
		t.Fatalf("%d jobs after a result older than the catalog, want another one", len(h.regexJobs))
	}
	h.resolveRegexes()
	r = h.cg(hb{member: "m1", epoch: r.MemberEpoch, owned: tpset{}})
	n := 0
	for _, tp := range r.Assignment.Topics {
		n += len(tp.Partitions)
	}
	if n != 201 {
		t.Fatalf("%d partitions after the second matching, want 201 (the new topic's too)", n)
	}
}

// BenchmarkRegexWorstTopic measures the matching of one topic name of 249
// bytes (Kafka's longest) by the costliest regex found within the request's
// 32 KB ("stars" of BenchmarkRegexFirstJoin): one op is one name, the
// least a slice of a RegexJob can do (one match cannot be cut short). Over
// 100,000 such names a matching takes 100,000 ops. It reports the shard's
// estimate of the work (units/op) and the time per unit.
func BenchmarkRegexWorstTopic(b *testing.B) {
	expr := strings.Repeat("(.*.*.*.*)", 3200)
	cat := catalog.New(catalog.Options{})
	var names []catalog.NewTopic
	for i := range 100 {
		names = append(names, catalog.NewTopic{Name: fmt.Sprintf("%s-%05d", strings.Repeat("t", 243), i), Partitions: 1})
	}
	for _, err := range cat.CreateMany(names) {
		if err != nil {
			b.Fatal(err)
		}
	}
	re := compileRegex(expr)
	size := (*Shard)(nil).newRegexMatch(expr).size
	b.ResetTimer()
	var j RegexJob
	for i := range b.N {
		if i%100 == 0 {
			j = regexJobFor(expr, cat)
			j.re = re
		}
		j.Step(1)
	}
	units := float64(size * 250)
	b.ReportMetric(units, "units/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/units, "ns/unit")
}

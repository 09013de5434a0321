package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// sliceLog records the slices of regex matchings in the order they got the
// node's slot, and the results handed to their shards; a label's slices wait
// at the gate while hold[label] is open (until it is closed).
type sliceLog struct {
	mu     sync.Mutex
	labels map[string]string // regex -> label
	slices []string
	done   []string
	queued []int // the partition's queued jobs when each result came
	hold   map[string]chan struct{}
}

func newSliceLog() *sliceLog {
	return &sliceLog{labels: map[string]string{}, hold: map[string]chan struct{}{}}
}

// install sets the coordinator's hooks; slice is the work per slice.
func (l *sliceLog) install(c *Coordinator, slice int) {
	c.regexSlice = slice
	c.resolveGate = func(j group.RegexJob) {
		l.mu.Lock()
		label := l.labels[j.Expr]
		l.slices = append(l.slices, label)
		ch := l.hold[label]
		l.mu.Unlock()
		if ch != nil {
			<-ch
		}
	}
	c.regexResolvedHook = func(r group.RegexResult) {
		// Called with the partition's mutex held.
		p := c.parts[PartitionFor(r.Group, len(c.parts))]
		l.mu.Lock()
		defer l.mu.Unlock()
		l.done = append(l.done, l.labels[r.Expr])
		l.queued = append(l.queued, len(p.regexJobs))
	}
}

func (l *sliceLog) snapshot() (slices, done []string, queued []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.slices...), append([]string(nil), l.done...), append([]int(nil), l.queued...)
}

// wordsRegex matches the 200 topics service-0<k>x of newRegexEnv, made
// costly by n words that match nothing: 300 words are over the shard's
// budget for a matching of its own (about 22M units over the 1,000 topics),
// 3,000 ten times that (three slices of 100M).
func wordsRegex(k, n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = fmt.Sprintf("zq%04dk", i)
	}
	return fmt.Sprintf("service-0%d.*|", k) + strings.Join(words, "|")
}

// regexHB heartbeats member m1 of group g (joining it at its first call)
// with regex re (nil: unchanged), and returns the number of topics
// assigned.
func regexHB(t *testing.T, e *env, epochs map[string]int32, g string, re *string) int {
	t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, g, "m1", epochs[g]
	r.RebalanceTimeoutMillis, r.SubscribedTopicRegex = -1, re
	if epochs[g] == 0 {
		r.RebalanceTimeoutMillis, r.Topics = 60000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	resp := e.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("heartbeat of %s: code %d", g, resp.ErrorCode)
	}
	epochs[g] = resp.MemberEpoch
	if resp.Assignment == nil {
		return 0
	}
	return len(resp.Assignment.Topics)
}

// groupOn returns a group id with prefix that PartitionFor puts on
// partition p of n.
func groupOn(prefix string, p int32, n int) string {
	for i := 0; ; i++ {
		if g := fmt.Sprintf("%s-%d", prefix, i); PartitionFor(g, n) == p {
			return g
		}
	}
}

// A long regex matching runs in slices and takes turns with the node's
// other matchings: once its first slice is done, the matchings queued
// meanwhile (another partition's, waiting for the node's slot, and one of
// its own partition, queued behind it) each run before its next slice.
// Before, it held the node's only slot to its end, for as long as a 32 KB
// regex over 100,000 long topic names takes (hours), while every other
// group's regex on the node waited. Its result is the whole matching.
func TestLongRegexMatchingTakesTurns(t *testing.T) {
	l := newSliceLog()
	e := newRegexEnvWith(t, 2, func(c *Coordinator) { l.install(c, 100<<20) })
	long, shortA, shortB := groupOn("long", 0, 2), groupOn("a", 0, 2), groupOn("b", 1, 2)
	reLong, reA, reB := wordsRegex(1, 3000), wordsRegex(2, 300), wordsRegex(3, 300)
	l.labels[reLong], l.labels[reA], l.labels[reB] = "long", "shortA", "shortB"
	hold := make(chan struct{})
	l.hold["long"] = hold
	epochs := map[string]int32{}

	regexHB(t, e, epochs, long, &reLong)
	testwait.For(t, 10*time.Second, "the long matching's first slice", func() bool {
		s, _, _ := l.snapshot()
		return len(s) == 1
	})
	regexHB(t, e, epochs, shortA, &reA) // queued on its partition, behind the long one
	regexHB(t, e, epochs, shortB, &reB) // waits for the node's slot
	testwait.For(t, 10*time.Second, "the other partition's matching waiting for the slot", func() bool {
		return e.c.regexes.waiting() == 1
	})
	close(hold)
	testwait.For(t, 10*time.Second, "the three results", func() bool {
		_, d, _ := l.snapshot()
		return len(d) == 3
	})
	got, _, _ := l.snapshot()
	n := strings.Count(strings.Join(got, " "), "long")
	want := append([]string{"long", "shortB", "shortA"}, slices.Repeat([]string{"long"}, n-1)...)
	if n < 3 || !slices.Equal(got, want) {
		t.Fatalf("slices in the order they ran: %v, want the long matching's first, the two short ones, then its others (at least 2)", got)
	}
	for g, k := range map[string]int{long: 200, shortA: 200, shortB: 200} {
		if got := regexHB(t, e, epochs, g, nil); got != k {
			t.Errorf("%s: %d topics assigned, want %d", g, got, k)
		}
	}
}

// A matching whose regex goes out of use part-way (its member changed it)
// is dropped between two slices: it is not queued again, and its
// partition's next matching (the member's new regex) takes the slot.
func TestRegexMatchingDroppedMidWay(t *testing.T) {
	l := newSliceLog()
	e := newRegexEnvWith(t, 1, func(c *Coordinator) { l.install(c, 100<<20) })
	reLong, reNew := wordsRegex(1, 3000), wordsRegex(2, 300)
	l.labels[reLong], l.labels[reNew] = "long", "new"
	hold := make(chan struct{})
	l.hold["long"] = hold
	epochs := map[string]int32{}

	regexHB(t, e, epochs, "g", &reLong)
	testwait.For(t, 10*time.Second, "the long matching's first slice", func() bool {
		s, _, _ := l.snapshot()
		return len(s) == 1
	})
	regexHB(t, e, epochs, "g", &reNew)
	close(hold)
	testwait.For(t, 10*time.Second, "the new regex's result", func() bool {
		_, d, _ := l.snapshot()
		return slices.Contains(d, "new")
	})
	s, d, q := l.snapshot()
	if !slices.Equal(s, []string{"long", "new"}) || !slices.Equal(d, []string{"new"}) || q[0] != 0 {
		t.Fatalf("slices %v, results %v, jobs queued at each result %v: want the long matching dropped after its first slice", s, d, q)
	}
	if got := regexHB(t, e, epochs, "g", nil); got != 200 {
		t.Errorf("%d topics assigned, want the new regex's 200", got)
	}
}

// A partition unloaded while one of its matchings runs drops the rest of
// it: the slice under way ends, the slot goes to another partition's
// matching, and nothing of the unloaded one is queued again.
func TestRegexMatchingDroppedOnUnload(t *testing.T) {
	l := newSliceLog()
	e := newRegexEnvWith(t, 2, func(c *Coordinator) { l.install(c, 100<<20) })
	long, other := groupOn("long", 0, 2), groupOn("b", 1, 2)
	reLong, reB := wordsRegex(1, 3000), wordsRegex(3, 300)
	l.labels[reLong], l.labels[reB] = "long", "other"
	hold := make(chan struct{})
	l.hold["long"] = hold
	epochs := map[string]int32{}

	regexHB(t, e, epochs, long, &reLong)
	testwait.For(t, 10*time.Second, "the long matching's first slice", func() bool {
		s, _, _ := l.snapshot()
		return len(s) == 1
	})
	e.c.Release(0)
	regexHB(t, e, epochs, other, &reB)
	testwait.For(t, 10*time.Second, "the other partition's matching waiting for the slot", func() bool {
		return e.c.regexes.waiting() == 1
	})
	close(hold)
	testwait.For(t, 10*time.Second, "the other partition's result", func() bool {
		_, d, _ := l.snapshot()
		return slices.Contains(d, "other")
	})
	p := e.c.parts[0]
	testwait.For(t, 10*time.Second, "the unloaded partition's slice to end", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.resolving
	})
	p.mu.Lock()
	queued := len(p.regexJobs)
	p.mu.Unlock()
	if s, d, _ := l.snapshot(); !slices.Equal(s, []string{"long", "other"}) || !slices.Equal(d, []string{"other"}) || queued != 0 {
		t.Fatalf("slices %v, results %v, %d jobs queued on the unloaded partition: want the long matching dropped", s, d, queued)
	}
}

// A matching that runs on with the slot (no other job waits) still stops
// between two slices once its regex is no longer wanted: here its member
// left the group.
func TestRegexMatchingStopsWhenItsMemberLeaves(t *testing.T) {
	l := newSliceLog()
	e := newRegexEnvWith(t, 1, func(c *Coordinator) { l.install(c, 100<<20) })
	reLong := wordsRegex(1, 3000)
	l.labels[reLong] = "long"
	hold := make(chan struct{})
	l.hold["long"] = hold
	epochs := map[string]int32{}

	regexHB(t, e, epochs, "g", &reLong)
	testwait.For(t, 10*time.Second, "the long matching's first slice", func() bool {
		s, _, _ := l.snapshot()
		return len(s) == 1
	})
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "g", "m1", -1
	if code := e.do(r).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode; code != 0 {
		t.Fatalf("leave: code %d", code)
	}
	close(hold)
	p := e.c.parts[0]
	testwait.For(t, 10*time.Second, "the matching to stop", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.resolving
	})
	p.mu.Lock()
	queued := len(p.regexJobs)
	p.mu.Unlock()
	if s, d, _ := l.snapshot(); !slices.Equal(s, []string{"long"}) || len(d) != 0 || queued != 0 {
		t.Fatalf("slices %v, results %v, %d jobs queued: want the matching stopped after its first slice", s, d, queued)
	}
}

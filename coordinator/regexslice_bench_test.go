//go:build unix

package coordinator

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store/memstore"
)

// BenchmarkRegexSlicing measures two costly regex matchings started together
// on two partitions, over 1,000 topics, until both results are in, on two
// coordinators alternately, to compare them under the same load: one runs
// each matching in one go (regexSlice unbounded: before matchings were
// sliced), the other in slices of group.RegexSliceBudget, the two matchings
// taking turns on the node's slot. It reports each one's time per pair of
// matchings (whole-ns/op, sliced-ns/op), and the process's CPU time
// (whole-cpu-ns/op, sliced-cpu-ns/op), which a loaded machine inflates
// less. "stars" costs about half what the shard estimates (some 15 ms a
// slice); "words" far less (a long alternation of words failing at their
// first letter: slices of some 40 µs), where the hand-overs weigh most.
func BenchmarkRegexSlicing(b *testing.B) {
	for _, c := range []struct{ name, regex string }{
		{"stars", strings.Repeat("(.*.*.*.*)", 50)},
		{"words", wordsRegex(1, 3000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			whole, sliced := newSlicingBench(b, math.MaxInt), newSlicingBench(b, group.RegexSliceBudget)
			var spent, cpu [2]time.Duration
			b.ResetTimer()
			for i := range b.N {
				for k := range 2 {
					m := (i + k) % 2 // alternate which goes first
					start, startCPU := time.Now(), cpuTime(b)
					[]*slicingBench{whole, sliced}[m].pair(b, c.regex, i)
					spent[m] += time.Since(start)
					cpu[m] += cpuTime(b) - startCPU
				}
			}
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "whole-ns/op")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "sliced-ns/op")
			b.ReportMetric(float64(cpu[0].Nanoseconds())/float64(b.N), "whole-cpu-ns/op")
			b.ReportMetric(float64(cpu[1].Nanoseconds())/float64(b.N), "sliced-cpu-ns/op")
		})
	}
}

// slicingBench is a coordinator of two partitions over 1,000 topics whose
// regex matchings run in slices of the given work.
type slicingBench struct {
	co     *Coordinator
	done   chan struct{}
	groups []string
}

func newSlicingBench(b *testing.B, slice int) *slicingBench {
	cat := catalog.New(catalog.Options{})
	for i := range 1000 {
		if _, err := cat.Create(fmt.Sprintf("service-%03d.events.orders-%04d", i%50, i), 1, nil); err != nil {
			b.Fatal(err)
		}
	}
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	gcfg.Topics = cat
	gcfg.ConsumerAssignmentInterval = 0
	co, err := New(Config{Partitions: 2, Group: gcfg, Store: memstore.New(),
		Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000)), Rand: seeded{rand.NewChaCha8([32]byte{7})}})
	if err != nil {
		b.Fatal(err)
	}
	sb := &slicingBench{co: co, done: make(chan struct{}, 2), groups: []string{groupOn("x", 0, 2), groupOn("y", 1, 2)}}
	co.regexSlice = slice
	co.regexResolvedHook = func(group.RegexResult) { sb.done <- struct{}{} }
	co.Start()
	b.Cleanup(func() { co.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := co.WaitLoaded(ctx); err != nil {
		b.Fatal(err)
	}
	return sb
}

// pair has a new member of each of the two groups join with regex (made
// new to the group by i), and waits for both matchings.
func (sb *slicingBench) pair(b *testing.B, regex string, i int) {
	for _, g := range sb.groups {
		re := fmt.Sprintf("%s|v%d", regex, i)
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID = 1, g, fmt.Sprintf("m%d", i)
		r.RebalanceTimeoutMillis, r.SubscribedTopicRegex, r.Topics = 60000, &re, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := sb.co.Handle(context.Background(), group.Client{ID: "cli", Host: "127.0.0.1"}, r)
		if err != nil || resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode != 0 {
			b.Fatalf("heartbeat: %v %v", err, resp)
		}
	}
	<-sb.done
	<-sb.done
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

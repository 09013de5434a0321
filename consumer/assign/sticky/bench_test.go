package sticky

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchGroup builds ntopics x nparts partitions and nmembers members.
// shape "same": everyone subscribes to everything; "one-different": the
// last member subscribes to the first half of the topics only;
// "rejoin+1": everyone owns its part of a previous balanced plan (owned
// partitions, generation and user data set) and one new member joins;
// "one-different+rejoin+1" combines both.
func benchGroup(tb testing.TB, shape string, ntopics, nparts, nmembers int) group {
	g := group{topics: map[string]assign.Topic{}}
	var names []string
	for i := 0; i < ntopics; i++ {
		n := fmt.Sprintf("topic-%04d", i)
		names = append(names, n)
		g.topics[n] = assign.Topic{Name: n, Partitions: int32(nparts)}
	}
	for i := 0; i < nmembers; i++ {
		g.members = append(g.members, assign.Member{ID: fmt.Sprintf("member-%05d", i), Topics: names, Generation: -1})
	}
	if strings.HasPrefix(shape, "one-different") {
		g.members[nmembers-1].Topics = names[:ntopics/2]
	}
	if strings.HasSuffix(shape, "rejoin+1") {
		prev, err := New().Assign(g.members, g.topics)
		if err != nil {
			tb.Fatal(err)
		}
		for i := range g.members {
			m := &g.members[i]
			m.Owned, m.Generation = prev[m.ID].Partitions, 10
			m.UserData = New().UserData(m.Owned, 10)
		}
		g.members = append(g.members, assign.Member{ID: fmt.Sprintf("member-%05d", nmembers), Topics: names, Generation: -1})
	}
	return g
}

var (
	benchMu     sync.Mutex
	benchGroups = map[string]group{}
)

func cachedGroup(tb testing.TB, shape string, nt, np, nm int) group {
	benchMu.Lock()
	defer benchMu.Unlock()
	key := fmt.Sprint(shape, nt, np, nm)
	g, ok := benchGroups[key]
	if !ok {
		clear(benchGroups) // keep only one large input alive
		g = benchGroup(tb, shape, nt, np, nm)
		benchGroups[key] = g
	}
	return g
}

// report attaches the plan's quality to the benchmark: the spread between
// the most and least loaded member, and how many previously owned
// partitions moved.
func report(b *testing.B, g group, got map[tp]string) {
	loads := loadsOf(g, got)
	b.ReportMetric(float64(slices.Max(loads)-slices.Min(loads)), "spread")
	_, prev := refClaims(g.members)
	b.ReportMetric(float64(len(prev)-kept(prev, got)), "moved")
}

func planOf(out map[string]assign.Assignment) map[tp]string {
	got := map[tp]string{}
	for id, a := range out {
		for _, t := range a.Partitions {
			for _, p := range t.Partitions {
				got[tp{t.Topic, p}] = id
			}
		}
	}
	return got
}

func benchAssignors(b *testing.B, g group, withSarama bool) {
	for _, a := range []assign.Assignor{New(), NewCooperative()} {
		b.Run("cohort-"+a.Name(), func(b *testing.B) {
			var out map[string]assign.Assignment
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if out, err = a.Assign(g.members, g.topics); err != nil {
					b.Fatal(err)
				}
			}
			report(b, g, planOf(out))
		})
	}
	for _, bal := range []kgo.GroupBalancer{kgo.StickyBalancer(), kgo.CooperativeStickyBalancer()} {
		b.Run("franz-"+bal.ProtocolName(), func(b *testing.B) {
			join := joinMembers(g)
			counts := partitionCounts(g)
			var into kgo.IntoSyncAssignment
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				mb, _, err := bal.MemberBalancer(join) // decoding metadata: not timed
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if into, err = mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(counts); err != nil {
					b.Fatal(err)
				}
			}
			got := map[tp]string{}
			for id, topics := range into.(*kgo.BalancePlan).AsMemberIDMap() {
				for topic, parts := range topics {
					for _, p := range parts {
						got[tp{topic, p}] = id
					}
				}
			}
			report(b, g, got)
		})
	}
	if withSarama {
		b.Run("sarama-sticky", func(b *testing.B) {
			var got map[tp]string
			b.ReportAllocs()
			for b.Loop() {
				got = saramaPlan(b, g)
			}
			report(b, g, got)
		})
	}
}

// BenchmarkLarge: 500 topics x 2000 partitions (1,000,000) and 2000
// members. Run with -benchtime=2x; it needs about 2 GB.
func BenchmarkLarge(b *testing.B) {
	if testing.Short() {
		b.Skip("large benchmark skipped in -short mode")
	}
	for _, shape := range []string{"same", "one-different", "rejoin+1", "one-different+rejoin+1"} {
		b.Run(shape, func(b *testing.B) {
			benchAssignors(b, cachedGroup(b, shape, 500, 2000, 2000), false)
		})
	}
}

// BenchmarkSmall: 20 topics x 100 partitions and 100 members, small enough
// for sarama's sticky strategy.
func BenchmarkSmall(b *testing.B) {
	if testing.Short() {
		b.Skip("skipped in -short mode")
	}
	for _, shape := range []string{"same", "one-different", "rejoin+1"} {
		b.Run(shape, func(b *testing.B) {
			benchAssignors(b, cachedGroup(b, shape, 20, 100, 100), true)
		})
	}
}

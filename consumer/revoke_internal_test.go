package consumer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
)

// TestFailedCommitOnRevokeKeepsMarks: a commit on revoke that the
// coordinator refuses is returned as a *CommitError and its offsets stay
// marked, unless marked again meanwhile. A kept mark survives when the
// partition comes back in the very next generation (nobody else can have
// owned it), is dropped when it comes back later, and is committed at the
// next revocation.
func TestFailedCommitOnRevokeKeepsMarks(t *testing.T) {
	cl := membertest.Client(t, membertest.StartKfake(t, kfake.SeedTopics(3, "events")))
	g := &Group{
		cfg:   GroupConfig{Member: member.Config{Group: "g"}},
		cl:    cl,
		log:   membertest.Logger(t),
		owned: map[string]map[int32]bool{"events": {0: true, 1: true, 2: true}}, ownedGen: 5,
		marks: map[tp]int64{}, failed: map[tp]int32{},
	}
	for p := int32(0); p < 3; p++ {
		g.Mark("events", p, int64(10+p))
	}
	// The group does not know member m: the commit is refused.
	err := g.revoke(nil, true, member.Generation{ID: 5, MemberID: "m"})
	var ce *CommitError
	if !errors.As(err, &ce) || ce.Generation != 5 {
		t.Fatalf("revoke returned %v, want a *CommitError of generation 5", err)
	}
	if want := map[string]map[int32]int64{"events": {0: 10, 1: 11, 2: 12}}; !reflect.DeepEqual(ce.Offsets, want) {
		t.Fatalf("CommitError.Offsets %v, want %v", ce.Offsets, want)
	}
	if want := map[tp]int64{{"events", 0}: 10, {"events", 1}: 11, {"events", 2}: 12}; !reflect.DeepEqual(g.marks, want) {
		t.Fatalf("marks after the failed commit %v, want them kept: %v", g.marks, want)
	}
	g.Mark("events", 2, 20) // marked again: no longer a leftover
	assigned := func(gen int32, ps ...int32) {
		b, err := FromAssign(MaxVersion, assign.Assignment{Partitions: []assign.TopicPartitions{{Topic: "events", Partitions: ps}}}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		g.assigned(context.Background(), member.Generation{ID: gen, Assignment: b})
	}
	assigned(6, 0)       // the next generation: 0's mark is still ours
	assigned(8, 0, 1, 2) // 1 comes back two generations later: another member may have committed
	if want := map[tp]int64{{"events", 0}: 10, {"events", 2}: 20}; !reflect.DeepEqual(g.marks, want) {
		t.Fatalf("marks after the partitions came back %v, want %v", g.marks, want)
	}
	// Generation -1 without a member id: a commit the empty group accepts.
	if err := g.revoke(nil, true, member.Generation{ID: -1}); err != nil {
		t.Fatal(err)
	}
	if len(g.marks) != 0 || len(g.failed) != 0 {
		t.Fatalf("marks %v, leftovers %v after a successful commit", g.marks, g.failed)
	}
	got, err := g.Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]int64{0: 10, 2: 20}; !reflect.DeepEqual(got["events"], want) {
		t.Fatalf("committed %v, want %v", got["events"], want)
	}
}

// TestRevokedTopicsForgotten: a member keeps nothing for a topic it no
// longer owns a partition of. Revoking a topic's last partition used to
// leave the topic's (empty) set behind, so a long-running member of a group
// over short-lived topics (a regex subscription to per-job topics) grew by
// one entry per topic it ever owned.
func TestRevokedTopicsForgotten(t *testing.T) {
	const topics = 50
	var names []string
	for i := range topics {
		names = append(names, fmt.Sprint("job-", i))
	}
	cl := membertest.Client(t, membertest.StartKfake(t, kfake.SeedTopics(1, names...)))
	g := &Group{
		cfg: GroupConfig{Member: member.Config{Group: "g"}}, cl: cl, log: membertest.Logger(t),
		owned: map[string]map[int32]bool{}, ownedGen: -1, marks: map[tp]int64{}, failed: map[tp]int32{},
	}
	for i, name := range names {
		b, err := FromAssign(MaxVersion, assign.Assignment{Partitions: []assign.TopicPartitions{{Topic: name, Partitions: []int32{0}}}}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		g.assigned(context.Background(), member.Generation{ID: int32(i + 1), Assignment: b})
		g.Mark(name, 0, 7)
		// An eager rebalance revokes everything; generation -1 without a
		// member id: a commit the empty group accepts.
		if err := g.revoke(nil, true, member.Generation{ID: -1}); err != nil {
			t.Fatal(err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.owned) != 0 || len(g.marks) != 0 || len(g.failed) != 0 {
		t.Fatalf("after %d topics owned and revoked one at a time: %d topics kept as owned, %d marks, %d failed marks; want none", topics, len(g.owned), len(g.marks), len(g.failed))
	}
}

package consumer

import (
	"context"
	"errors"
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

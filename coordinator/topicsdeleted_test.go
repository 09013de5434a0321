package coordinator

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTopicsDeletedBeforeLaterRequests: once TopicsDeleted has returned
// (the node's DeleteTopics has, and its client may create the topic again
// and commit to it), an offset committed to a topic of that name is kept,
// even when the partition's loop has not run yet (a busy machine). The
// deletion was left for the loop alone: a commit that got the partition's
// mutex first was acknowledged, then removed by the deletion that came
// before it.
func TestTopicsDeletedBeforeLaterRequests(t *testing.T) {
	t.Cleanup(func() { ctlHook = nil }) // after the env's Close: the loops are gone
	e := newEnv(t, nil, nil)
	e.c.WaitLoaded(context.Background())
	const grp = "g"
	p := PartitionFor(grp, 8)
	member, gen := e.joinOne(grp)
	if r := e.do(commitRequest(grp, member, gen, "t", 5)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("commit")
	}
	if r := e.do(commitRequest(grp, member, gen, "s", 7)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("commit")
	}

	// The partition's loop is late: it holds the control message and has
	// not taken the partition's mutex.
	entered, unblock, next := make(chan struct{}), make(chan struct{}), make(chan struct{})
	calls := 0 // the loop's alone
	ctlHook = func(q int32, x ctl) {
		if q != p || x != ctlTopicsDeleted {
			return
		}
		calls++
		switch calls {
		case 1:
			close(entered)
			<-unblock
		case 2:
			close(next)
		}
	}
	t.Cleanup(func() {
		select {
		case <-unblock:
		default:
			close(unblock)
		}
	})
	e.c.TopicsDeleted([]string{"s", "t"})
	<-entered

	// The topic is created again and its consumer commits.
	if r := e.do(commitRequest(grp, member, gen, "t", 2)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("commit after the deletion")
	}
	close(unblock)
	// The loop's turn on the held control message: nothing must be left
	// for it. The loop takes the next control message only after that
	// turn is over.
	e.c.TopicsDeleted([]string{"other"})
	<-next
	// A commit answered after the turn's writes: they are applied too.
	if r := e.do(commitRequest(grp, member, gen, "u", 1)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("commit of another topic")
	}
	if off := e.fetch(grp, "t"); off != 2 {
		t.Fatalf("offset committed after the deletion: %d, want 2", off)
	}
	if off := e.fetch(grp, "s"); off != -1 {
		t.Fatalf("offset of a deleted topic: %d, want none", off)
	}
}

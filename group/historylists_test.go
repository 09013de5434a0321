package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHistoryBoundLists: HistoryListsTag bounds each list of the events and
// of the waiting view to m entries, leaves out unchanged members first
// (uncounted), counts the rest in Omitted, and leaves the events it was
// given (the shard's) as they were; a request without the tag, or before
// v5, is not bounded.
func TestHistoryBoundLists(t *testing.T) {
	ev := RebalanceEvent{Seq: 1,
		MoreCauses: []Cause{{Kind: CauseMemberJoined}, {Kind: CauseMemberJoined}, {Kind: CauseMemberJoined}},
		WaitedFor:  []Wait{{MemberID: "a"}, {MemberID: "b"}},
		Evicted:    []string{"x"},
		Members: []MemberChange{{MemberID: "a", Decoded: true}, {MemberID: "b", New: true},
			{MemberID: "c", Decoded: true, Added: []TopicPartitions{{Topic: "t", Partitions: []int32{1}}}},
			{MemberID: "d", Changed: true}},
	}
	stored := []RebalanceEvent{ev}
	doc := &HistoryDoc{History: stored, Waiting: &Waiting{Members: []WaitingMember{{MemberID: "a"}, {MemberID: "b"}, {MemberID: "c"}}}}
	doc.BoundLists(1)
	e := doc.History[0]
	if len(e.MoreCauses) != 1 || len(e.WaitedFor) != 1 || len(e.Evicted) != 1 || len(e.Members) != 1 || e.Members[0].MemberID != "b" {
		t.Errorf("bounded to 1: %+v", e)
	}
	if e.Omitted == nil || *e.Omitted != (Omitted{MoreCauses: 2, WaitedFor: 1, Members: 2}) {
		t.Errorf("omitted: %+v, want 2 causes, 1 wait, 2 changed members", e.Omitted)
	}
	if len(doc.Waiting.Members) != 1 || doc.Waiting.OmittedMembers != 2 {
		t.Errorf("waiting: %d listed, %d omitted; want 1 and 2", len(doc.Waiting.Members), doc.Waiting.OmittedMembers)
	}
	if s := stored[0]; len(s.MoreCauses) != 3 || len(s.Members) != 4 || s.Omitted != nil {
		t.Errorf("the stored event changed: %+v", s)
	}

	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	if _, ok := HistoryListsRequested(req); ok {
		t.Errorf("bounded without the tag")
	}
	RequestHistoryLists(req, 3)
	if m, ok := HistoryListsRequested(req); !ok || m != 3 {
		t.Errorf("tag 3 read as %d %v", m, ok)
	}
	req.Version = 4
	if _, ok := HistoryListsRequested(req); ok {
		t.Errorf("bounded at v4, which has no tagged fields")
	}
}

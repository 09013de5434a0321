package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDescribeGroupsTags feeds any bytes as the value of each of cohort's
// DescribeGroups tags, in a request (read by the node) and in a response
// group (read by the CLI and the console): nothing panics, and what is read
// back from a value cohort itself wrote is what was written.
func FuzzDescribeGroupsTags(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3}, int32(3), "Stable", "uniform")
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, int32(-1), "", "")
	f.Add([]byte(`{"events":[{"seq":1}]}`), int32(1<<30), "Assigning", "range")
	f.Add([]byte{0, 0, 0, 1, 0x80}, int32(0), "x", "\x00")
	f.Fuzz(func(t *testing.T, val []byte, n int32, state, assignor string) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = 5
		for _, tag := range []uint32{HistoryTag, HistoryListsTag, MembersTag, DescribeTag, ConsumerSummaryTag} {
			req.UnknownTags.Set(tag, val)
		}
		HistoryRequested(req)
		HistoryListsRequested(req)
		MembersRequested(req)

		d := kmsg.NewDescribeGroupsResponseGroup()
		for _, tag := range []uint32{HistoryTag, HistoryListsTag, MembersTag, DescribeTag, ConsumerSummaryTag} {
			d.UnknownTags.Set(tag, val)
		}
		HistoryTagOf(&d)
		MemberCountOf(&d)
		DescribeTagOf(&d)
		ConsumerSummaryOf(&d)

		// Round trips of what cohort writes.
		var w kmsg.DescribeGroupsResponseGroup
		want := ConsumerSummary{Members: n, State: state, Epoch: n ^ 7, Assignor: assignor}
		SetConsumerSummary(&w, want)
		got, ok := ConsumerSummaryOf(&w)
		if ok != (n >= 0) || (ok && got != want) {
			t.Fatalf("consumer summary %+v read back as %+v (ok %v)", want, got, ok)
		}
		SetMemberCount(&w, n)
		if c, ok := MemberCountOf(&w); ok != (n >= 0) || (ok && c != int(n)) {
			t.Fatalf("member count %d read back as %d (ok %v)", n, c, ok)
		}
		SetDescribeTag(&w, n, state)
		if g, l, ok := DescribeTagOf(&w); !ok || g != n || l != state {
			t.Fatalf("describe tag %d %q read back as %d %q (ok %v)", n, state, g, l, ok)
		}
	})
}

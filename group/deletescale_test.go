package group

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteScaleShard is a shard holding n empty classic groups with 10
// committed offsets each (5 topics of 2 partitions, as the admin scale test
// commits them), every write completed at once.
func deleteScaleShard(tb testing.TB, n int) (*Shard, time.Time) {
	s := NewShard(Defaults(), seededReader{rand.NewChaCha8([32]byte{7})})
	now := time.UnixMilli(1_700_000_000_000)
	for gi := 0; gi < n; gi++ {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, deleteScaleID(gi), -1
		for ti := 0; ti < 5; ti++ {
			tp := kmsg.NewOffsetCommitRequestTopic()
			tp.Topic = fmt.Sprintf("topic-%05d", (gi+ti*37)%10000)
			for p := 0; p < 2; p++ {
				pp := kmsg.NewOffsetCommitRequestTopicPartition()
				pp.Partition, pp.Offset = int32(p), int64(gi)
				tp.Partitions = append(tp.Partitions, pp)
			}
			req.Topics = append(req.Topics, tp)
		}
		var out Output
		s.OffsetCommit(now, Ticket(gi+1), req, &out)
		completeWrites(tb, s, now, &out)
	}
	return s, now
}

func deleteScaleID(i int) string { return fmt.Sprintf("classic-%06d", i) }

// completeWrites reports every write of out durable, and those that follow
// from it, until none is left.
func completeWrites(tb testing.TB, s *Shard, now time.Time, out *Output) []Reply {
	var replies []Reply
	for len(out.Writes) > 0 || len(out.Replies) > 0 {
		replies = append(replies, out.Replies...)
		ws := append([]Write(nil), out.Writes...)
		out.Reset()
		for _, w := range ws {
			s.WriteDone(now, w.ID, ErrNone, out)
		}
	}
	return replies
}

// BenchmarkDeleteGroupsShard measures one DeleteGroups of a fifth of a
// shard's groups (10 offsets each), from the request to its reply with the
// write reported durable, at several shard sizes: the cost per group
// (ns/group) should not grow with the shard.
//
//	go test -run '^$' -bench DeleteGroupsShard -benchmem ./group/
func BenchmarkDeleteGroupsShard(b *testing.B) {
	for _, n := range []int{500, 2000, 8000} {
		b.Run(fmt.Sprintf("groups=%d", n), func(b *testing.B) {
			s, now := deleteScaleShard(b, n)
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Version = 2
			for i := 0; i < n/5; i++ {
				req.Groups = append(req.Groups, deleteScaleID(i*5))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var out Output
				s.DeleteGroups(now, 1, req, &out)
				replies := completeWrites(b, s, now, &out)
				if len(replies) != 1 || replies[0].Resp.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode != ErrNone {
					b.Fatalf("replies %v", replies)
				}
				b.StopTimer()
				// The deleted groups come back for the next round.
				for _, id := range req.Groups {
					c := kmsg.NewPtrOffsetCommitRequest()
					c.Version, c.Group, c.Generation = 8, id, -1
					c.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "topic-00000", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
					for t := 1; t < 5; t++ {
						c.Topics = append(c.Topics, kmsg.OffsetCommitRequestTopic{Topic: fmt.Sprintf("topic-%05d", t), Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}, {Partition: 1}}})
					}
					var o Output
					s.OffsetCommit(now, 2, c, &o)
					completeWrites(b, s, now, &o)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(req.Groups)), "ns/group")
		})
	}
}

// fetchAll is the group's committed offsets as OffsetFetch v8 (all topics)
// answers them.
func fetchAll(s *Shard, id string) []kmsg.OffsetFetchResponseGroupTopic {
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = id
	f.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	return s.OffsetFetch(f).Groups[0].Topics
}

// TestDeleteGroupsManyKeepsState: a DeleteGroups of many groups (its
// tombstones made in one slice of their final size) deletes the groups
// named and their offsets, in the shard and in the store, and leaves every
// other group as it was; a shard reloaded from the store agrees.
func TestDeleteGroupsManyKeepsState(t *testing.T) {
	h := newH(t)
	const n = 300
	for gi := 0; gi < n; gi++ {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, deleteScaleID(gi), -1
		for ti := 0; ti < 1+gi%4; ti++ {
			tp := kmsg.NewOffsetCommitRequestTopic()
			tp.Topic = fmt.Sprintf("topic-%d", (gi+ti)%7)
			for p := 0; p < 1+gi%3; p++ {
				pp := kmsg.NewOffsetCommitRequestTopicPartition()
				pp.Partition, pp.Offset = int32(p), int64(gi*10+p)
				if p == 1 {
					pp.Metadata = kmsg.StringPtr("m")
				}
				tp.Partitions = append(tp.Partitions, pp)
			}
			req.Topics = append(req.Topics, tp)
		}
		h.do(func(tk Ticket, out *Output) { h.s.OffsetCommit(h.now, tk, req, out) })
	}
	before := map[string][]kmsg.OffsetFetchResponseGroupTopic{}
	for gi := 0; gi < n; gi++ {
		before[deleteScaleID(gi)] = fetchAll(h.s, deleteScaleID(gi))
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = 2
	deleted := map[string]bool{}
	for gi := 0; gi < n; gi += 3 {
		del.Groups = append(del.Groups, deleteScaleID(gi))
		deleted[deleteScaleID(gi)] = true
	}
	del.Groups = append(del.Groups, "no-such-group")
	tk := h.do(func(tk Ticket, out *Output) { h.s.DeleteGroups(h.now, tk, del, out) })
	resp := h.got[tk].(*kmsg.DeleteGroupsResponse)
	if len(resp.Groups) != len(del.Groups) {
		t.Fatalf("%d answers, want %d", len(resp.Groups), len(del.Groups))
	}
	for i, g := range resp.Groups {
		want := int16(ErrNone)
		if g.Group == "no-such-group" {
			want = ErrGroupIDNotFound
		}
		if g.Group != del.Groups[i] || g.ErrorCode != want {
			t.Errorf("answer %d: %s %d, want %s %d", i, g.Group, g.ErrorCode, del.Groups[i], want)
		}
	}
	for k := range h.store {
		for id := range deleted {
			if bytes.Contains([]byte(k), []byte(id)) {
				t.Errorf("store still holds key %q of deleted group %s", k, id)
			}
		}
	}
	for gi := 0; gi < n; gi++ {
		id := deleteScaleID(gi)
		got := fetchAll(h.s, id)
		switch {
		case deleted[id] && (h.s.Group(id) != nil || len(got) != 0):
			t.Errorf("%s: deleted, but the shard still has it (offsets %v)", id, got)
		case !deleted[id] && !reflect.DeepEqual(got, before[id]):
			t.Errorf("%s: offsets changed by the delete of other groups:\nbefore %v\nafter  %v", id, before[id], got)
		}
	}
	if d := h.checkReload(); d != "" {
		t.Error(d)
	}
}

// TestDeleteGroupsAllocatesPerGroup: the bytes a DeleteGroups allocates per
// deleted group do not grow with the number of groups it deletes. Its
// tombstones were appended one by one to one slice, whose growth copied
// them again and again: 7.8 KB per group deleting 100 groups, 11.4 KB
// deleting 1,600 (BenchmarkDeleteGroupsShard).
func TestDeleteGroupsAllocatesPerGroup(t *testing.T) {
	perGroup := func(n int) float64 {
		s, now := deleteScaleShard(t, n)
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = 2
		for i := 0; i < n; i++ {
			req.Groups = append(req.Groups, deleteScaleID(i))
		}
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		var out Output
		s.DeleteGroups(now, 1, req, &out)
		runtime.ReadMemStats(&b)
		return float64(b.TotalAlloc-a.TotalAlloc) / float64(n)
	}
	small, large := perGroup(100), perGroup(3000)
	t.Logf("bytes allocated per deleted group: %.0f deleting 100 groups, %.0f deleting 3,000", small, large)
	if large > small*1.25 {
		t.Errorf("DeleteGroups allocated %.0f bytes per group deleting 3,000 groups, %.0f deleting 100: want no more than 1.25 times", large, small)
	}
}

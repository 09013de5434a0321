package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAPITableErrorAnswers: for every group-scoped API at every version kmsg
// knows, Error answers with the request's response kind and version, and
// the answer encodes and decodes.
func TestAPITableErrorAnswers(t *testing.T) {
	for _, a := range APIs() {
		req := kmsg.RequestForKey(a.Key)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req := kmsg.RequestForKey(a.Key)
			req.SetVersion(v)
			resp := a.Error(req, ErrNotCoordinator)
			if resp.Key() != a.Key || resp.GetVersion() != v {
				t.Fatalf("%s v%d: Error answered %s v%d", kmsg.NameForKey(a.Key), v, kmsg.NameForKey(resp.Key()), resp.GetVersion())
			}
			back := req.ResponseKind()
			back.SetVersion(v)
			if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatalf("%s v%d: error answer does not decode: %v", kmsg.NameForKey(a.Key), v, err)
			}
		}
		if got := LookupAPI(a.Key); got != a {
			t.Errorf("LookupAPI(%d) is not the table's entry", a.Key)
		}
	}
	if LookupAPI(kmsg.Metadata.Int16()) != nil || LookupAPI(-1) != nil || LookupAPI(32000) != nil {
		t.Error("LookupAPI found a description for a key that is not group-scoped")
	}
}

// TestAPITableSplitMerge: a multi-group request split into parts and the
// parts' answers merged gives one answer per asked group, in the request's
// order, whatever order the parts answered in.
func TestAPITableSplitMerge(t *testing.T) {
	s := NewShard(Config{}, nil)
	ids := []string{"c", "a", "b", "d"}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Version, describe.Groups = 5, ids
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, ids
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	for _, id := range ids {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = id
		fetch.Groups = append(fetch.Groups, g)
	}
	groupsOf := func(resp kmsg.Response) []string {
		var out []string
		switch r := resp.(type) {
		case *kmsg.DescribeGroupsResponse:
			for _, g := range r.Groups {
				out = append(out, g.Group)
			}
		case *kmsg.DeleteGroupsResponse:
			for _, g := range r.Groups {
				out = append(out, g.Group)
			}
		case *kmsg.OffsetFetchResponse:
			for _, g := range r.Groups {
				out = append(out, g.Group)
			}
		}
		return out
	}
	for _, req := range []kmsg.Request{describe, del, fetch} {
		a := LookupAPI(req.Key())
		got, multi, all := a.Groups(req)
		if !multi || all || len(got) != len(ids) {
			t.Fatalf("%s: Groups = %v, multi %v, all %v", kmsg.NameForKey(req.Key()), got, multi, all)
		}
		// Parts answered in reverse: {3}, {1,2}, {0}.
		var parts []kmsg.Response
		for _, idx := range [][]int{{3}, {1, 2}, {0}} {
			sub := a.Split(req, idx)
			var out Output
			a.Serve(s, time.UnixMilli(1_700_000_000_000), 1, Client{}, sub, &out)
			if len(out.Replies) != 1 {
				// DeleteGroups of missing groups answers at once too.
				t.Fatalf("%s: part %v gave %d replies", kmsg.NameForKey(req.Key()), idx, len(out.Replies))
			}
			if g := groupsOf(out.Replies[0].Resp); len(g) != len(idx) {
				t.Fatalf("%s: part %v answered groups %v", kmsg.NameForKey(req.Key()), idx, g)
			}
			parts = append(parts, out.Replies[0].Resp)
		}
		merged := groupsOf(a.Merge(req, parts))
		if len(merged) != len(ids) {
			t.Fatalf("%s: merged %v, want %v", kmsg.NameForKey(req.Key()), merged, ids)
		}
		for i := range ids {
			if merged[i] != ids[i] {
				t.Fatalf("%s: merged %v, want %v", kmsg.NameForKey(req.Key()), merged, ids)
			}
		}
	}
}

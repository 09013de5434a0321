package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// listAnswer is a ListGroups answer of the groups given as
// "id state type protocol-type" (protocol type "-" for none).
func listAnswer(groups ...string) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = 5
	for _, g := range groups {
		f := strings.Fields(g)
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.GroupState, lg.GroupType, lg.ProtocolType = f[0], f[1], f[2], strings.TrimPrefix(f[3], "-")
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

func groupIDs(resp *kmsg.ListGroupsResponse) string {
	var ids []string
	for _, g := range resp.Groups {
		ids = append(ids, g.Group)
	}
	return strings.Join(ids, ",")
}

// TestListFilter: the node keeps the groups ListFilterTag asks for, as
// the console's search defines them (the id case-sensitive, anywhere or at
// its start; state and type in any case; the protocol type exactly), the
// first Limit by id, and says how many it listed, how many matched, and
// which protocol types the listed groups have.
func TestListFilter(t *testing.T) {
	all := []string{
		"orders-eu Stable classic consumer",
		"Orders-us Empty classic -",
		"billing-orders Stable consumer consumer",
		"audit Empty classic connect",
		"orders-asia PreparingRebalance classic consumer",
	}
	for _, tc := range []struct {
		f                 ListFilter
		want              string
		matching          int32
		wantProtocolTypes string
	}{
		{ListFilter{Limit: -1}, "orders-eu,Orders-us,billing-orders,audit,orders-asia", 5, "connect,consumer"},
		{ListFilter{Limit: 2}, "Orders-us,audit", 5, "connect,consumer"}, // the first by id (bytes: upper case first)
		{ListFilter{ID: "orders", Limit: -1}, "orders-eu,billing-orders,orders-asia", 3, "connect,consumer"},
		{ListFilter{ID: "orders", Prefix: true, Limit: -1}, "orders-eu,orders-asia", 2, "connect,consumer"},
		{ListFilter{ID: "orders", Prefix: true, Limit: 1}, "orders-asia", 2, "connect,consumer"},
		{ListFilter{ID: "orders", Limit: 0}, "", 3, "connect,consumer"},
		{ListFilter{ID: "Orders", Limit: -1}, "Orders-us", 1, "connect,consumer"},
		{ListFilter{State: "stable", Limit: -1}, "orders-eu,billing-orders", 2, "connect,consumer"},
		{ListFilter{Type: "CONSUMER", Limit: -1}, "billing-orders", 1, "connect,consumer"},
		{ListFilter{ProtocolType: "consumer", ID: "-", Limit: -1}, "orders-eu,billing-orders,orders-asia", 3, "connect,consumer"},
		{ListFilter{ProtocolType: "Consumer", Limit: -1}, "", 0, "connect,consumer"},
		{ListFilter{ID: "o*", Limit: -1}, "", 0, "connect,consumer"}, // no wildcards
	} {
		resp := listAnswer(all...)
		FilterList(resp, tc.f)
		if got := groupIDs(resp); got != tc.want {
			t.Errorf("%+v: answered %q, want %q", tc.f, got, tc.want)
		}
		s, ok := ListSummaryOf(resp)
		if !ok || s.Listed != 5 || s.Matching != tc.matching || strings.Join(s.ProtocolTypes, ",") != tc.wantProtocolTypes {
			t.Errorf("%+v: summary %+v (ok %v), want 5 listed, %d matching, protocol types %s", tc.f, s, ok, tc.matching, tc.wantProtocolTypes)
		}
	}
	// The protocol types named are bounded.
	var many []string
	for i := range MaxListProtocolTypes + 50 {
		many = append(many, fmt.Sprintf("g%d Empty classic p%03d", i, i))
	}
	resp := listAnswer(many...)
	FilterList(resp, ListFilter{ID: "nothing", Limit: -1})
	if s, ok := ListSummaryOf(resp); !ok || len(s.ProtocolTypes) != MaxListProtocolTypes || s.ProtocolTypes[0] != "p000" || s.Listed != int32(len(many)) || s.Matching != 0 {
		t.Errorf("%d protocol types: summary %d types from %q, %d listed, %d matching (ok %v)", len(many), len(s.ProtocolTypes), s.ProtocolTypes[:1], s.Listed, s.Matching, ok)
	}
}

// TestListFilterRequest: the request's tag reads back as written, only
// from v3 (the first flexible version), and a request without it is none.
func TestListFilterRequest(t *testing.T) {
	want := ListFilter{ID: "tëam/ä", Prefix: true, State: "Stable", Type: "classic", ProtocolType: "connect", Limit: 1000}
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = v
		if _, ok := ListFilterRequested(req); ok {
			t.Errorf("v%d without the tag: a filter read", v)
		}
		RequestListFilter(req, want)
		got, ok := ListFilterRequested(req)
		if ok != (v >= 3) || ok && got != want {
			t.Errorf("v%d: read %+v (ok %v), want %+v", v, got, ok, want)
		}
	}
	// Written by a client, it survives the wire: franz-go writes unknown
	// tags of flexible versions and keeps them when it reads.
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	RequestListFilter(req, want)
	var back kmsg.ListGroupsRequest
	back.Version = 5
	if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if got, ok := ListFilterRequested(&back); !ok || got != want {
		t.Errorf("after the wire: %+v (ok %v)", got, ok)
	}
	resp := listAnswer("a Empty classic -")
	FilterList(resp, want)
	var rback kmsg.ListGroupsResponse
	rback.Version = 5
	if err := rback.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if s, ok := ListSummaryOf(&rback); !ok || s.Listed != 1 || s.Matching != 0 || !slices.Equal(s.ProtocolTypes, []string{}) {
		t.Errorf("the answer after the wire: %+v (ok %v)", s, ok)
	}
	// An answer without the tag (Kafka, an older cohort) has no summary.
	if _, ok := ListSummaryOf(listAnswer("a Empty classic -")); ok {
		t.Error("an answer without the tag has a summary")
	}
}

// FuzzListFilterTags feeds any bytes as the value of ListFilterTag in a
// request (read by the node) and in an answer (read by the console):
// nothing panics, a summary read is consistent, and a filter cohort wrote
// reads back as written.
func FuzzListFilterTags(f *testing.F) {
	f.Add([]byte{1, 4, 'a', 'b', 'c', 1, 1, 1, 0, 0, 3, 0xe8}, "team", int32(1000))
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 2, 2, 9, 'c', 'o', 'n', 's', 'u', 'm', 'e', 'r'}, "", int32(-1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, "\x00", int32(0))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 2, 1}, "x", int32(1<<30))
	f.Fuzz(func(t *testing.T, val []byte, id string, limit int32) {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		req.UnknownTags.Set(ListFilterTag, val)
		if lf, ok := ListFilterRequested(req); ok {
			FilterList(listAnswer("a Empty classic -", "b Stable consumer consumer"), lf)
		}
		resp := listAnswer("a Empty classic -")
		resp.UnknownTags.Set(ListFilterTag, val)
		if s, ok := ListSummaryOf(resp); ok && (s.Listed < 0 || s.Matching < 0 || s.Matching > s.Listed || len(s.ProtocolTypes) > MaxListProtocolTypes) {
			t.Fatalf("an inconsistent summary read: %+v", s)
		} else if ok {
			var listed, matching int32
			for i, c := range s.ByPartition {
				if c.Partition < 0 || c.Partition >= s.Partitions || i > 0 && c.Partition <= s.ByPartition[i-1].Partition || c.Matching > c.Listed {
					t.Fatalf("inconsistent counts per partition read: %+v", s)
				}
				listed, matching = listed+c.Listed, matching+c.Matching
			}
			if s.ByPartition != nil && (listed != s.Listed || matching != s.Matching) {
				t.Fatalf("counts per partition that do not add up read: %+v", s)
			}
		}
		want := ListFilter{ID: id, Prefix: limit%2 == 0, State: id, ProtocolType: id, Limit: limit}
		w := kmsg.NewPtrListGroupsRequest()
		w.Version = 3
		RequestListFilter(w, want)
		if got, ok := ListFilterRequested(w); !ok || got != want {
			t.Fatalf("filter %+v read back as %+v (ok %v)", want, got, ok)
		}
	})
}

// TestListSummaryByPartition: the counts per partition a node appends to
// its summary read back as written; counts that do not add up to the
// summary's, or name a partition out of range or twice, are dropped and the
// rest of the summary kept; a summary without them (a node before them)
// reads as before.
func TestListSummaryByPartition(t *testing.T) {
	read := func(s ListSummary) (ListSummary, bool) {
		resp := kmsg.NewPtrListGroupsResponse()
		setListSummary(resp, s)
		return ListSummaryOf(resp)
	}
	good := ListSummary{Listed: 7, Matching: 3, ProtocolTypes: []string{"consumer"}, Partitions: 50,
		ByPartition: []PartitionCount{{0, 2, 1}, {17, 5, 2}, {49, 0, 0}}}
	if got, ok := read(good); !ok || fmt.Sprint(got) != fmt.Sprint(good) {
		t.Errorf("read back %+v (ok %v), want %+v", got, ok, good)
	}
	old := ListSummary{Listed: 7, Matching: 3, ProtocolTypes: []string{"consumer"}}
	if got, ok := read(old); !ok || fmt.Sprint(got) != fmt.Sprint(old) {
		t.Errorf("without counts per partition: read %+v (ok %v)", got, ok)
	}
	for name, bad := range map[string][]PartitionCount{
		"short of the total": {{0, 2, 1}, {17, 4, 2}},
		"out of range":       {{0, 2, 1}, {50, 5, 2}},
		"negative":           {{-1, 2, 1}, {17, 5, 2}},
		"twice":              {{17, 2, 1}, {17, 5, 2}},
		"out of order":       {{17, 5, 2}, {0, 2, 1}},
		"more matching":      {{0, 1, 2}, {17, 6, 1}},
	} {
		s := good
		s.ByPartition = bad
		if got, ok := read(s); !ok || fmt.Sprint(got) != fmt.Sprint(old) {
			t.Errorf("%s: read %+v (ok %v), want the summary without them", name, got, ok)
		}
	}
	for _, n := range []int32{-3, maxListPartitions + 1} {
		s := good
		s.Partitions = n
		s.ByPartition = []PartitionCount{{0, 7, 3}}
		resp := kmsg.NewPtrListGroupsResponse()
		setListSummary(resp, s)
		if got, ok := ListSummaryOf(resp); !ok || got.ByPartition != nil {
			t.Errorf("%d partitions: read %+v (ok %v), want none per partition", n, got, ok)
		}
	}
}

// TestListFilteredByShards: the coordinator partitions' own filtering
// (listFiltered, then mergeListSummaries over the partitions) answers what
// FilterList answers over the unfiltered list of every partition: the same
// groups, in the same order under a limit, and the same summary.
func TestListFilteredByShards(t *testing.T) {
	a, b := newH(t), newH(t)
	a.stableGroup("orders-g", 2) // Stable, protocol type consumer
	b.stableGroup("billing-g", 1)
	for i, id := range []string{"orders-eu", "Orders-us", "audit", "orders-asia"} {
		a.commit(id, "", -1, 9, map[string]int64{"t": 5})
		b.commit(fmt.Sprintf("%s-%d", id, i), "", -1, 9, map[string]int64{"t": 5})
	}
	for _, tc := range []struct {
		f   ListFilter
		req *kmsg.ListGroupsRequest
	}{
		{ListFilter{Limit: -1}, &kmsg.ListGroupsRequest{}},
		{ListFilter{Limit: 3}, &kmsg.ListGroupsRequest{}},
		{ListFilter{ID: "orders", Limit: -1}, &kmsg.ListGroupsRequest{}},
		{ListFilter{ID: "orders", Prefix: true, Limit: 2}, &kmsg.ListGroupsRequest{}},
		{ListFilter{State: "STABLE", Limit: 10}, &kmsg.ListGroupsRequest{}},
		{ListFilter{ProtocolType: "consumer", Limit: -1}, &kmsg.ListGroupsRequest{}},
		{ListFilter{Type: "consumer", Limit: -1}, &kmsg.ListGroupsRequest{}},
		{ListFilter{ID: "-", Limit: 4}, &kmsg.ListGroupsRequest{StatesFilter: []string{"Empty"}}},
	} {
		tc.req.Version = 5
		RequestListFilter(tc.req, tc.f)
		want := kmsg.NewPtrListGroupsResponse()
		want.Groups = append(a.s.ListGroups(tc.req), b.s.ListGroups(tc.req)...)
		FilterList(want, tc.f)
		got := listedByShards(tc.req, tc.f, nil, a, b)
		ws, _ := ListSummaryOf(want)
		gs, ok := ListSummaryOf(got)
		checkByPartition(t, gs, tc.req, tc.f, nil, a, b)
		gs = summaryTotals(gs) // FilterList's has no counts per partition
		wantIDs, gotIDs := groupIDs(want), groupIDs(got)
		if tc.f.Limit < 0 { // no order then
			wantIDs, gotIDs = sortedIDs(want), sortedIDs(got)
		}
		if gotIDs != wantIDs || !ok || fmt.Sprint(gs) != fmt.Sprint(ws) {
			t.Errorf("%+v %v: the partitions answered %q %+v, FilterList %q %+v", tc.f, tc.req.StatesFilter, gotIDs, gs, wantIDs, ws)
		}
		if ws.Listed == 0 {
			t.Errorf("%+v: nothing listed", tc.f)
		}
	}
}

// listedByShards is the node's answer to req carrying f, over the shards
// of hs: each shard's listFiltered, merged by ListGroups' Merge.
func listedByShards(req *kmsg.ListGroupsRequest, f ListFilter, describes func(string) bool, hs ...*h) *kmsg.ListGroupsResponse {
	parts := make([]kmsg.Response, 0, len(hs))
	for _, h := range hs {
		parts = append(parts, h.s.listFiltered(req, f, describes))
	}
	return LookupAPI(kmsg.ListGroups.Int16()).Merge(req, parts).(*kmsg.ListGroupsResponse)
}

// summaryTotals is s without its counts per partition.
func summaryTotals(s ListSummary) ListSummary {
	s.Partitions, s.ByPartition = 0, nil
	return s
}

// checkByPartition: the merged summary s of the shards hs (partition i is
// hs[i]) names every shard, each with the counts of its own answer.
func checkByPartition(t *testing.T, s ListSummary, req *kmsg.ListGroupsRequest, f ListFilter, describes func(string) bool, hs ...*h) {
	t.Helper()
	var want []PartitionCount
	for i, h := range hs {
		ps, _ := ListSummaryOf(h.s.listFiltered(req, f, describes))
		want = append(want, PartitionCount{Partition: int32(i), Listed: ps.Listed, Matching: ps.Matching})
	}
	if s.Partitions != int32(len(hs)) || fmt.Sprint(s.ByPartition) != fmt.Sprint(want) {
		t.Errorf("%+v: counts per partition %d %v, want %d %v", f, s.Partitions, s.ByPartition, len(hs), want)
	}
}

// TestListFilteredRandom: for random sets of groups over 1 to 5 shards,
// and random filters and limits, the partitions' answer (each keeping the
// first f.Limit ids as it lists, then the merge of their first) is
// FilterList's over the unfiltered list: the same groups with the same
// fields, in the same order under a limit, and the same summary.
func TestListFilteredRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 848))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	randID := func() string {
		b := make([]byte, 1+rng.IntN(5))
		for i := range b {
			b[i] = "ab-Z"[rng.IntN(4)]
		}
		return string(b)
	}
	for round := range 12 {
		hs := make([]*h, 1+rng.IntN(5))
		seen := map[string]bool{}
		for i := range hs {
			hs[i] = newH(t)
			for range rng.IntN(60) {
				id := randID()
				if seen[id] {
					continue
				}
				seen[id] = true
				switch rng.IntN(10) {
				case 0:
					hs[i].stableGroup(id, 1) // Stable, protocol type consumer
				case 1:
					hs[i].newMember(id, jo{ptype: pick("connect", "consumer")}) // a rebalance under way
				case 2:
					hs[i].cg(hb{group: id, member: "m-" + id, names: []string{}, owned: tpset{}}) // type consumer
				default:
					hs[i].commit(id, "", -1, 9, map[string]int64{"t": 5}) // Empty
				}
			}
		}
		for range 40 {
			f := ListFilter{
				ID:           pick("", "", "a", "b-", "-", "Z", "ab", "zz"),
				Prefix:       rng.IntN(2) == 0,
				State:        pick("", "", "", "empty", "STABLE", "Dead", "PreparingRebalance", "CompletingRebalance"),
				Type:         pick("", "", "", "classic", "CONSUMER"),
				ProtocolType: pick("", "", "", "consumer", "connect"),
				Limit:        []int32{-1, -1, 0, 1, 2, 3, 7, 20, 1000, rng.Int32N(100)}[rng.IntN(10)],
			}
			req := kmsg.NewPtrListGroupsRequest()
			req.Version = 5
			if rng.IntN(4) == 0 {
				req.StatesFilter = []string{pick("Empty", "Stable", "PreparingRebalance")}
			}
			RequestListFilter(req, f)
			// The server's check of the groups the client may
			// describe (Client.Describes), or none.
			var describes func(string) bool
			if hidden := pick("", "", "a", "-", "Z"); hidden != "" {
				describes = func(id string) bool { return !strings.HasPrefix(id, hidden) }
			}
			want := kmsg.NewPtrListGroupsResponse()
			for _, h := range hs {
				want.Groups = append(want.Groups, h.s.ListGroups(req)...)
			}
			if describes != nil { // as the server's check after the listing
				want.Groups = slices.DeleteFunc(want.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return !describes(g.Group) })
			}
			FilterList(want, f)
			got := listedByShards(req, f, describes, hs...)
			ws, _ := ListSummaryOf(want)
			gs, ok := ListSummaryOf(got)
			checkByPartition(t, gs, req, f, describes, hs...)
			gs = summaryTotals(gs)
			wantRows, gotRows := fmt.Sprint(want.Groups), fmt.Sprint(got.Groups)
			if f.Limit < 0 { // no order then
				wantRows, gotRows = fmt.Sprint(sortedRows(want)), fmt.Sprint(sortedRows(got))
			}
			if gotRows != wantRows || !ok || fmt.Sprint(gs) != fmt.Sprint(ws) {
				t.Fatalf("round %d, %d shards, %+v %v, describes set %v:\nthe partitions answered %v %+v\nFilterList           %v %+v",
					round, len(hs), f, req.StatesFilter, describes != nil, gotRows, gs, wantRows, ws)
			}
		}
	}
}

func sortedRows(resp *kmsg.ListGroupsResponse) []kmsg.ListGroupsResponseGroup {
	return slices.SortedFunc(slices.Values(resp.Groups), func(a, b kmsg.ListGroupsResponseGroup) int {
		return strings.Compare(a.Group, b.Group)
	})
}

func sortedIDs(resp *kmsg.ListGroupsResponse) string {
	ids := strings.Split(groupIDs(resp), ",")
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// TestListGroupsDescribes: with Client.Describes set, a ListGroups without
// the filter tag answers only the groups it allows, and one with the tag
// neither answers nor counts the others.
func TestListGroupsDescribes(t *testing.T) {
	h := newH(t)
	for _, id := range []string{"app-1", "app-2", "other"} {
		h.commit(id, "", -1, 9, map[string]int64{"t": 5})
	}
	api := LookupAPI(kmsg.ListGroups.Int16())
	cl := Client{Principal: "User:alice", Describes: func(id string) bool { return strings.HasPrefix(id, "app-") }}
	serve := func(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
		tk := h.do(func(t Ticket, out *Output) { api.Serve(h.s, h.now, t, cl, req, out) })
		return h.resp(tk).(*kmsg.ListGroupsResponse)
	}
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	if got := sortedIDs(serve(req)); got != "app-1,app-2" {
		t.Errorf("without the tag: answered %q, want app-1,app-2", got)
	}
	RequestListFilter(req, ListFilter{ID: "-", Limit: 1})
	resp := serve(req)
	s, ok := ListSummaryOf(resp)
	if got := groupIDs(resp); got != "app-1" || !ok || s.Listed != 2 || s.Matching != 2 {
		t.Errorf("with the tag: answered %q %+v (ok %v), want app-1, 2 listed, 2 matching", got, s, ok)
	}
}

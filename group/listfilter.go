package group

import (
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListFilterTag is a tagged field of ListGroups (flexible versions, v3+),
// in the request and in the response, with which a client that shows a
// few groups of many (the console's groups page with a search) has the
// node filter the list instead of receiving every group.
//
// Request value: int8 flags (bit 0: the id must start with ID rather than
// hold it anywhere), compact string ID (case-sensitive; "" matches every
// id), compact string State and compact string Type (each compared in any
// case, "" matches every group), compact string ProtocolType (exact, ""
// matches every group), int32 Limit (answer at most this many of the
// matching groups, the first by id; < 0: every matching group). A later
// version may append fields; a reader ignores bytes after those it knows.
//
// The node applies it to the groups it would otherwise answer — those that
// pass the request's own StatesFilter and TypesFilter and that the
// principal may describe — and answers the matching ones (sorted by id
// when there is a limit), with response tag ListFilterTag: int32 Listed
// (how many groups it would have answered without the filter), int32
// Matching (how many of them match, those beyond the limit included), and
// a compact array of compact strings: the distinct protocol types of the
// Listed groups, sorted, at most MaxListProtocolTypes; then the node's
// counts per coordinator partition (ListSummary). A request without
// the tag, every stock client's, gets the answer it always got. A node that
// does not know the tag (Kafka, an older cohort) skips it and answers every
// group without the response tag, so a client filters the list itself
// when the answer has none.
const ListFilterTag = 10005

// MaxListProtocolTypes bounds the protocol types a ListFilterTag answer
// names: they are chosen by clients, and a node could have one per group.
const MaxListProtocolTypes = 100

// ListFilter is the value of the request's ListFilterTag.
type ListFilter struct {
	ID           string // part of the id, case-sensitive
	Prefix       bool   // ID must start the id
	State, Type  string // any case
	ProtocolType string // exact
	Limit        int32  // < 0: no limit
}

// Keep reports whether a group of this id, state, type ("classic" or
// "consumer") and protocol type passes f (its limit aside).
func (f ListFilter) Keep(id, state, gtype, protocolType string) bool {
	switch {
	case f.State != "" && !strings.EqualFold(state, f.State),
		f.Type != "" && !strings.EqualFold(gtype, f.Type),
		f.ProtocolType != "" && protocolType != f.ProtocolType,
		f.Prefix && !strings.HasPrefix(id, f.ID),
		!f.Prefix && !strings.Contains(id, f.ID):
		return false
	}
	return true
}

// RequestListFilter puts f into req's ListFilterTag (read by v3+ only).
func RequestListFilter(req *kmsg.ListGroupsRequest, f ListFilter) {
	var flags int8
	if f.Prefix {
		flags |= 1
	}
	b := kbin.AppendInt8(nil, flags)
	b = kbin.AppendCompactString(b, f.ID)
	b = kbin.AppendCompactString(b, f.State)
	b = kbin.AppendCompactString(b, f.Type)
	b = kbin.AppendCompactString(b, f.ProtocolType)
	b = kbin.AppendInt32(b, f.Limit)
	req.UnknownTags.Set(ListFilterTag, b)
}

// ListFilterRequested reads req's ListFilterTag; ok is false when it has
// none, its version is before v3, or the value does not decode.
func ListFilterRequested(req *kmsg.ListGroupsRequest) (f ListFilter, ok bool) {
	if req.Version < 3 {
		return ListFilter{}, false
	}
	req.UnknownTags.Each(func(key uint32, val []byte) {
		if key != ListFilterTag {
			return
		}
		r := kbin.Reader{Src: val}
		f.Prefix = r.Int8()&1 != 0
		f.ID = r.CompactString()
		f.State = r.CompactString()
		f.Type = r.CompactString()
		f.ProtocolType = r.CompactString()
		f.Limit = r.Int32()
		ok = r.Complete() == nil
	})
	if !ok {
		return ListFilter{}, false
	}
	return f, true
}

// ListSummary is the value of the response's ListFilterTag.
//
// After the protocol types a node appends its counts per coordinator
// partition: int32 Partitions (the node's number of coordinator
// partitions), then a compact array of (int32 partition, int32 listed,
// int32 matching), one for each partition it served when it answered, in
// partition order. In a cluster a client adds them up by partition, so a
// partition two nodes both counted while it moved is counted once, and
// one neither counted is known to be missing. A node before this field
// (or a server filtering the merged list, FilterList) sends none; a
// reader before it ignores it.
type ListSummary struct {
	Listed, Matching int32
	ProtocolTypes    []string
	// Partitions and ByPartition: 0 and nil when the answer has no
	// counts per partition, or ones that do not add up (ListSummaryOf
	// drops them, keeping the rest).
	Partitions  int32
	ByPartition []PartitionCount
}

// PartitionCount is one coordinator partition's counts in a ListSummary.
type PartitionCount struct {
	Partition, Listed, Matching int32
}

// maxListPartitions bounds the coordinator partitions a ListSummary may
// claim (node.MaxPartitionCount, which this package cannot import): a
// reader walks them all.
const maxListPartitions = math.MaxInt16

// listFiltered is a shard's answer to a ListGroups carrying f: the
// matching groups (the first f.Limit by id when f.Limit >= 0) with this
// shard's summary. Only the matching groups get an entry: a search that
// keeps a dozen groups of a shard's thousands allocates for the dozen.
// Under a limit the shard keeps no more than f.Limit ids as it walks its
// groups (the smallest so far, in a max-heap), so the unfiltered page,
// which asks for the first 1,000 of every group, does not collect and
// sort every id of the shard. With describes set (Client.Describes), a
// group it refuses is neither answered nor counted.
func (s *Shard) listFiltered(req *kmsg.ListGroupsRequest, f ListFilter, describes func(string) bool) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.Version
	var sum ListSummary
	ptypes := map[string]bool{}
	var ids []string
	var first firstIDs // grown as groups match: a search matching a dozen allocates for a dozen
	for id, g := range s.groups {
		// The ACL check first: it needs only the id, so a group the
		// principal may not describe is skipped without reading the
		// group itself (a cache miss for each of a partition's
		// thousands of groups, which the check's lookups keep from
		// overlapping).
		if describes != nil && !describes(id) {
			continue
		}
		state, gtype, ok := listedAs(g, req)
		if !ok {
			continue
		}
		sum.Listed++
		if g.protocolType != "" {
			ptypes[g.protocolType] = true
		}
		if !f.Keep(id, state, gtype, g.protocolType) {
			continue
		}
		sum.Matching++
		if f.Limit >= 0 {
			first.add(id, int(f.Limit))
		} else {
			ids = append(ids, id)
		}
	}
	if f.Limit >= 0 {
		ids = first.ids
		slices.Sort(ids)
	}
	resp.Groups = make([]kmsg.ListGroupsResponseGroup, 0, len(ids))
	for _, id := range ids {
		g := s.groups[id]
		state, gtype, _ := listedAs(g, req)
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, g.protocolType, state, gtype
		resp.Groups = append(resp.Groups, lg)
	}
	sum.ProtocolTypes = firstSorted(ptypes)
	setListSummary(resp, sum)
	return resp
}

// firstIDs keeps the smallest ids added to it, at most a limit of them,
// in a max-heap: ids[0] is the largest kept, the one a smaller id
// replaces once the heap is full.
type firstIDs struct{ ids []string }

func (h *firstIDs) add(id string, limit int) {
	if len(h.ids) < limit {
		h.ids = append(h.ids, id)
		for i := len(h.ids) - 1; i > 0; { // up
			p := (i - 1) / 2
			if h.ids[p] >= h.ids[i] {
				break
			}
			h.ids[p], h.ids[i] = h.ids[i], h.ids[p]
			i = p
		}
		return
	}
	if limit == 0 || id >= h.ids[0] {
		return
	}
	h.ids[0] = id
	for i, n := 0, len(h.ids); ; { // down
		big, l, r := i, 2*i+1, 2*i+2
		if l < n && h.ids[l] > h.ids[big] {
			big = l
		}
		if r < n && h.ids[r] > h.ids[big] {
			big = r
		}
		if big == i {
			return
		}
		h.ids[i], h.ids[big] = h.ids[big], h.ids[i]
		i = big
	}
}

// firstSorted is the first MaxListProtocolTypes of set, sorted. The first
// of a union are the first of the parts' first: the merge of the shards'
// answers is exact.
func firstSorted(set map[string]bool) []string {
	out := slices.Sorted(func(yield func(string) bool) {
		for p := range set {
			if !yield(p) {
				return
			}
		}
	})
	return out[:min(len(out), MaxListProtocolTypes)]
}

// mergeListSummaries sets resp's ListFilterTag, the merge of the shards'
// answers to a ListGroups carrying a filter: their summaries added up,
// and each one's counts under its partition. parts holds every
// partition's answer, partition i's at i (API.Merge of an all-partition
// request).
func mergeListSummaries(resp *kmsg.ListGroupsResponse, parts []kmsg.Response) {
	sum := ListSummary{Partitions: int32(len(parts)), ByPartition: make([]PartitionCount, 0, len(parts))}
	ptypes := map[string]bool{}
	for i, p := range parts {
		ps, ok := ListSummaryOf(p.(*kmsg.ListGroupsResponse))
		if !ok { // a partition that answered an error: another node's
			continue
		}
		sum.ByPartition = append(sum.ByPartition, PartitionCount{Partition: int32(i), Listed: ps.Listed, Matching: ps.Matching})
		sum.Listed += ps.Listed
		sum.Matching += ps.Matching
		for _, t := range ps.ProtocolTypes {
			ptypes[t] = true
		}
	}
	sum.ProtocolTypes = firstSorted(ptypes)
	setListSummary(resp, sum)
}

// mergeFirst is the first limit groups by id of the shards' answers, each
// sorted by id (listFiltered sorts under a limit; a part that is not is
// sorted here). It merges them by their heads, in a min-heap of the
// parts, and builds no more than limit entries: the unfiltered page's
// 1,000 rows, not 1,000 from each of the node's partitions.
func mergeFirst(parts []kmsg.Response, limit int32) []kmsg.ListGroupsResponseGroup {
	byID := func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) }
	lists := make([][]kmsg.ListGroupsResponseGroup, 0, len(parts))
	n := 0
	for _, p := range parts {
		gs := p.(*kmsg.ListGroupsResponse).Groups
		if len(gs) == 0 {
			continue
		}
		if !slices.IsSortedFunc(gs, byID) {
			slices.SortFunc(gs, byID)
		}
		lists = append(lists, gs)
		n += len(gs)
	}
	out := make([]kmsg.ListGroupsResponseGroup, 0, min(n, int(limit)))
	less := func(i, j int) bool { return lists[i][0].Group < lists[j][0].Group }
	down := func(i int) {
		for {
			small, l, r := i, 2*i+1, 2*i+2
			if l < len(lists) && less(l, small) {
				small = l
			}
			if r < len(lists) && less(r, small) {
				small = r
			}
			if small == i {
				return
			}
			lists[i], lists[small] = lists[small], lists[i]
			i = small
		}
	}
	for i := len(lists)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for len(out) < cap(out) {
		out = append(out, lists[0][0])
		if lists[0] = lists[0][1:]; len(lists[0]) == 0 {
			lists[0] = lists[len(lists)-1]
			lists = lists[:len(lists)-1]
		}
		down(0)
	}
	return out
}

// FilterList applies f to resp, the answer the node would give without
// it (after authorization), and sets resp's ListFilterTag.
func FilterList(resp *kmsg.ListGroupsResponse, f ListFilter) {
	s := ListSummary{Listed: int32(len(resp.Groups))}
	ptypes := map[string]bool{}
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if g.ProtocolType != "" {
			ptypes[g.ProtocolType] = true
		}
		gtype := g.GroupType
		if gtype == "" {
			gtype = "classic"
		}
		if f.Keep(g.Group, g.GroupState, gtype, g.ProtocolType) {
			kept = append(kept, g)
		}
	}
	clear(resp.Groups[len(kept):]) // the strings of those left out
	resp.Groups = kept
	s.Matching = int32(len(kept))
	if f.Limit >= 0 {
		slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
		resp.Groups = resp.Groups[:min(len(resp.Groups), int(f.Limit))]
	}
	s.ProtocolTypes = firstSorted(ptypes)
	setListSummary(resp, s)
}

func setListSummary(resp *kmsg.ListGroupsResponse, s ListSummary) {
	n := 4 + 4 + 5 + 4 + 5 + 12*len(s.ByPartition) // made once at its size
	for _, p := range s.ProtocolTypes {
		n += 5 + len(p)
	}
	b := kbin.AppendInt32(make([]byte, 0, n), s.Listed)
	b = kbin.AppendInt32(b, s.Matching)
	b = kbin.AppendCompactArrayLen(b, len(s.ProtocolTypes))
	for _, p := range s.ProtocolTypes {
		b = kbin.AppendCompactString(b, p)
	}
	if s.Partitions > 0 {
		b = kbin.AppendInt32(b, s.Partitions)
		b = kbin.AppendCompactArrayLen(b, len(s.ByPartition))
		for _, c := range s.ByPartition {
			b = kbin.AppendInt32(b, c.Partition)
			b = kbin.AppendInt32(b, c.Listed)
			b = kbin.AppendInt32(b, c.Matching)
		}
	}
	resp.UnknownTags.Set(ListFilterTag, b)
}

// ListSummaryOf reads resp's ListFilterTag; ok is false when it has none
// (a node that does not know the tag, a request without it) or it does
// not decode.
func ListSummaryOf(resp *kmsg.ListGroupsResponse) (s ListSummary, ok bool) {
	resp.UnknownTags.Each(func(key uint32, val []byte) {
		if key != ListFilterTag {
			return
		}
		r := kbin.Reader{Src: val}
		s.Listed = r.Int32()
		s.Matching = r.Int32()
		n := r.CompactArrayLen()
		if n < 0 || n > MaxListProtocolTypes {
			return
		}
		s.ProtocolTypes = make([]string, 0, n)
		for range n {
			s.ProtocolTypes = append(s.ProtocolTypes, r.CompactString())
		}
		ok = r.Complete() == nil && s.Listed >= 0 && s.Matching >= 0 && s.Matching <= s.Listed
		if ok && len(r.Src) > 0 {
			s.Partitions, s.ByPartition = readByPartition(&r, s)
		}
	})
	if !ok {
		return ListSummary{}, false
	}
	return s, true
}

// readByPartition reads a ListSummary's counts per partition, the rest of
// r. Counts that do not decode, name a partition twice, out of order or
// out of range, or do not add up to the summary's are dropped (0, nil):
// the summary's own counts are used as they are.
func readByPartition(r *kbin.Reader, s ListSummary) (int32, []PartitionCount) {
	n := r.Int32()
	k := r.CompactArrayLen()
	if r.Complete() != nil || n <= 0 || n > maxListPartitions || k < 0 || k > n {
		return 0, nil
	}
	out := make([]PartitionCount, 0, k)
	var listed, matching int64
	for range k {
		c := PartitionCount{Partition: r.Int32(), Listed: r.Int32(), Matching: r.Int32()}
		if r.Complete() != nil || c.Partition < 0 || c.Partition >= n || c.Matching < 0 || c.Matching > c.Listed ||
			len(out) > 0 && c.Partition <= out[len(out)-1].Partition {
			return 0, nil
		}
		listed += int64(c.Listed)
		matching += int64(c.Matching)
		out = append(out, c)
	}
	if listed != int64(s.Listed) || matching != int64(s.Matching) {
		return 0, nil
	}
	return n, out
}

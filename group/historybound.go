package group

import (
	"encoding/json"
	"slices"
	"strings"
)

// The stored bound of the rebalance history (docs/history.md, "Stored
// bound"). An event lists every member of its group (members, waited_for)
// and every member it evicted: unbounded, a rebalance of a classic group of
// 10,000 members was a 4 MB event (1.2 MB stored, compressed), of 100,000
// members 40 MB (12 MB stored), encoded in one to two seconds on the
// shard's goroutine; a record that large is refused by etcd
// (--max-request-bytes, 1.5 MiB by default), which failed the write of the
// request that completed a consumer-protocol group's rebalance and made the
// partition reload, and took the other writes of its batch with it. So
// each event is bounded before it is stored (and before the shard keeps
// it, so that a reload gives back the same history):
//
//   - waited_for, evicted and members keep at most storedListMax entries
//     each; members keeps first those whose assignment changed (or that are
//     new), as HistoryListsTag does, and leaves out the unchanged ones
//     uncounted; what else is left out is counted in Omitted;
//   - if the event's JSON is still over the byte budget (members with many
//     partitions each), members is halved until it fits, down to none, then
//     waited_for and evicted;
//   - if it still does not fit (clients' ids and details of tens of KiB),
//     every cause keeps only its kind and time (Omitted.CauseDetails), and
//     the leader and protocol are left out. more_causes (at most 64) are
//     never cut: the storm detector counts their kinds.

// storedListMax bounds each of an event's lists when it is stored.
const storedListMax = 200

// storedEventBytes bounds a stored event's JSON (before compression); a
// store with a record limit (Config.MaxRecordBytes) gets at most a quarter
// of it.
const storedEventBytes = 256 << 10

// historyEventBudget is the most bytes of JSON a stored event may take.
func (s *Shard) historyEventBudget() int {
	b := storedEventBytes
	if most := s.cfg.MaxRecordBytes; most > 0 {
		b = min(b, most/4)
	}
	return b
}

// boundStored bounds ev's lists for storage (see above), counting what it
// leaves out in ev.Omitted, and returns ev's JSON, at most budget bytes
// unless even its causes' kinds and its group id take more.
func boundStored(ev *RebalanceEvent, budget int) []byte {
	waits, evicted, members := ev.WaitedFor, ev.Evicted, ev.Members
	var base Omitted
	if ev.Omitted != nil {
		base = *ev.Omitted
	}
	// Members whose assignment changed (or that are new) first: the ones
	// left out of the others are not counted.
	var changed, unchanged []MemberChange
	split := false
	apply := func(n, ln int) {
		if len(members) > n && !split {
			split = true
			for _, m := range members {
				if memberChanged(&m) {
					changed = append(changed, m)
				} else {
					unchanged = append(unchanged, m)
				}
			}
		}
		o := base
		ev.WaitedFor = waits[:min(len(waits), ln):min(len(waits), ln)]
		o.WaitedFor += len(waits) - len(ev.WaitedFor)
		ev.Evicted = evicted[:min(len(evicted), ln):min(len(evicted), ln)]
		o.Evicted += len(evicted) - len(ev.Evicted)
		switch {
		case len(members) <= n:
			ev.Members = members
		case len(changed) >= n:
			ev.Members = changed[:n:n]
			o.Members += len(changed) - n
		default:
			kept := make([]MemberChange, 0, n)
			kept = append(append(kept, changed...), unchanged[:n-len(changed)]...)
			slices.SortFunc(kept, func(a, b MemberChange) int { return strings.Compare(a.MemberID, b.MemberID) })
			ev.Members = kept
		}
		// Empty lists as nil, as a reloaded event has them.
		if len(ev.WaitedFor) == 0 {
			ev.WaitedFor = nil
		}
		if len(ev.Evicted) == 0 {
			ev.Evicted = nil
		}
		if len(ev.Members) == 0 {
			ev.Members = nil
		}
		ev.Omitted = nil
		if o != (Omitted{}) {
			ev.Omitted = &o
		}
	}
	encode := func() []byte {
		b, err := json.Marshal(ev)
		if err != nil { // cannot happen: the event holds only plain values
			b = []byte("{}")
		}
		return b
	}
	// The members' moves go first: waited_for (who held the rebalance
	// up, slowest first) and evicted are short entries a reader of the
	// event needs most.
	n, ln := storedListMax, storedListMax
	apply(n, ln)
	b := encode()
	for len(b) > budget && n > 0 {
		n /= 2
		apply(n, ln)
		b = encode()
	}
	for len(b) > budget && ln > 0 {
		ln /= 2
		apply(n, ln)
		b = encode()
	}
	if len(b) <= budget {
		return b
	}
	// Only the causes and the names are left: keep what the storm
	// detector and a reader of the table need, each cause's kind and time.
	ev.Cause = Cause{Kind: ev.Cause.Kind, At: ev.Cause.At}
	more := make([]Cause, len(ev.MoreCauses))
	for i, c := range ev.MoreCauses {
		more[i] = Cause{Kind: c.Kind, At: c.At}
	}
	ev.MoreCauses = more
	ev.Leader, ev.Protocol = "", ""
	o := Omitted{CauseDetails: true}
	if ev.Omitted != nil {
		o = *ev.Omitted
		o.CauseDetails = true
	}
	ev.Omitted = &o
	return encode()
}

// memberChanged reports whether the rebalance changed m's assignment (or m
// is new): the members the list bounds keep first.
func memberChanged(m *MemberChange) bool {
	return m.New || m.Changed || len(m.Added) > 0 || len(m.Removed) > 0
}

// The members and waits an event of a big group can keep are chosen before
// its entries are built: building, decoding and diffing an entry for every
// member of a 10,000-member group, and sorting them all, was most of what
// recording its rebalance cost the shard's goroutine, for entries the
// stored bound then dropped. What is chosen is exactly what boundStored
// would keep of the full lists (it then works on the chosen ones, with the
// left-out ones already counted in Omitted).

// storeCandidates returns the indexes of the members of a group of n
// (member i has id(i); changed(i): its assignment changed, or it is new)
// that a stored event can list, in member-id order: all of them when n is
// at most storedListMax, else the storedListMax first by id among the
// changed ones, filled up with the first unchanged ones; and how many
// changed members it left out (unchanged ones left out are not counted).
func storeCandidates(n int, id func(int) string, changed func(int) bool) (keep []int, omitted int) {
	byID := func(a, b int) int { return strings.Compare(id(a), id(b)) }
	if n <= storedListMax {
		keep = make([]int, n)
		for i := range keep {
			keep[i] = i
		}
		slices.SortFunc(keep, byID)
		return keep, 0
	}
	var ch, un []int
	for i := range n {
		if changed(i) {
			ch = append(ch, i)
		} else {
			un = append(un, i)
		}
	}
	if len(ch) >= storedListMax {
		return smallestK(ch, storedListMax, byID), len(ch) - storedListMax
	}
	keep = append(ch, smallestK(un, storedListMax-len(ch), byID)...)
	slices.SortFunc(keep, byID)
	return keep, 0
}

// storeWaits returns the storedListMax first of ws in sortWaits' order
// (slowest first), sorted, and how many it left out. ws is reordered.
func storeWaits(ws []Wait) (kept []Wait, omitted int) {
	k := min(len(ws), storedListMax)
	return smallestK(ws, k, compareWaits), len(ws) - k
}

// smallestK returns the k smallest of xs by cmp, sorted; it reorders xs
// and returns a prefix of it. It costs about one comparison per element
// when k is small against len(xs), where sorting xs would cost log len(xs).
func smallestK[T any](xs []T, k int, cmp func(a, b T) int) []T {
	if k <= 0 {
		return xs[:0]
	}
	if k*4 >= len(xs) {
		slices.SortFunc(xs, cmp)
		return xs[:min(k, len(xs))]
	}
	// xs[:k] is kept as a heap with the greatest of the kept at its root;
	// an element smaller than the root replaces it.
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= k {
				return
			}
			c := l
			if r := l + 1; r < k && cmp(xs[r], xs[l]) > 0 {
				c = r
			}
			if cmp(xs[c], xs[i]) <= 0 {
				return
			}
			xs[i], xs[c] = xs[c], xs[i]
			i = c
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for j := k; j < len(xs); j++ {
		if cmp(xs[j], xs[0]) < 0 {
			xs[0], xs[j] = xs[j], xs[0]
			down(0)
		}
	}
	top := xs[:k]
	slices.SortFunc(top, cmp)
	return top
}

// Package sticky implements Kafka's "sticky" (KIP-54, KIP-341) and
// "cooperative-sticky" (KIP-429) partition assignors.
//
// Both compute the same plan. Balance comes first: the multiset of member
// partition counts is the most even one the subscriptions allow (the sorted
// counts are lexicographically smallest, which for members with equal
// subscriptions means counts differing by at most one). Among all plans with
// that balance, the assignor keeps the largest possible number of partitions
// with their previous owner. Both goals are met exactly, not approximately:
// the plan is a minimum-cost flow computed on a graph whose nodes are the
// members and the classes of partitions that share a set of subscribers, so
// its size does not grow with the number of partitions.
//
// Previous ownership is what a member reports in its subscription's owned
// partitions (subscription v1+) or, when it reports none, what its sticky
// user data says (Kafka's StickyAssignor format, readable and written by the
// Java client, franz-go and sarama). When two members claim a partition, the
// claim with the highest generation wins; claims tied at the highest
// generation cancel each other, as in Kafka.
//
// The cooperative variant then withholds every partition that would move to
// a new owner while another member still claims it: the old owner revokes
// it, rejoins, and the follow-up rebalance hands it over. No partition is
// ever assigned while another member reports owning it.
package sticky

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// Protocol names of the assignors in this package. Package
// consumer/assign/assignors finds them, with those of package assign, by
// name.
const (
	Name            = "sticky"
	CooperativeName = "cooperative-sticky"
)

// New returns the eager "sticky" assignor (Kafka's StickyAssignor).
func New() assign.Assignor { return assignor{} }

// NewCooperative returns the "cooperative-sticky" assignor (Kafka's
// CooperativeStickyAssignor, KIP-429).
func NewCooperative() assign.Assignor { return assignor{cooperative: true} }

type assignor struct{ cooperative bool }

func (a assignor) Name() string {
	if a.cooperative {
		return CooperativeName
	}
	return Name
}

func (a assignor) Cooperative() bool { return a.cooperative }

// UserData returns Kafka's sticky user data for what the member owns: the
// assignment sorted by topic, then the generation (version 1; version 0 when
// generation is negative). Both variants announce it so that a leader of
// either kind, in any client, can read the previous assignment.
func (a assignor) UserData(owned []assign.TopicPartitions, generation int32) []byte {
	return encodeUserData(owned, generation)
}

// ErrDuplicateMember is returned by Assign when two members share an ID.
var ErrDuplicateMember = errors.New("sticky: duplicate member ID")

// Assign computes the plan; see the package documentation.
func (a assignor) Assign(members []assign.Member, topics map[string]assign.Topic) (map[string]assign.Assignment, error) {
	p, sl, err := a.plan(members, topics)
	if err != nil {
		return nil, err
	}
	return p.output(sl), nil
}

// plan solves the problem and returns it with the plan's slots.
func (a assignor) plan(members []assign.Member, topics map[string]assign.Topic) (*problem, *slots, error) {
	p, err := newProblem(members, topics)
	if err != nil {
		return nil, nil, err
	}
	p.resolveOwners(a.cooperative)
	s := p.newSolver()
	if err := s.solve(); err != nil {
		return nil, nil, err
	}
	return p, p.materialize(s, a.cooperative), nil
}

// AssignEach computes the plan of Assign and hands it out member by member
// (assign.Streamer), cutting each member's assignment from the plan in
// place instead of building all of them. Large plans are cut and emitted
// by several goroutines, each a contiguous range of members holding about
// the same number of partitions: for a million partitions most of a
// leader's time is here and in what emit does with them (encoding).
func (a assignor) AssignEach(members []assign.Member, topics map[string]assign.Topic, workers int, emit func(w, i int, a assign.Assignment) error) error {
	p, sl, err := a.plan(members, topics)
	if err != nil {
		return err
	}
	workers = max(1, min(workers, p.nparts/minPartsPerWorker, len(p.members)))
	if workers == 1 {
		return p.emitRange(sl, 0, len(p.members), 0, emit, nil)
	}
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
		errs   = make([]error, workers)
		from   = 0
	)
	for w := range workers {
		// Members up to the w+1-th share of the partitions.
		to := len(p.members)
		if w < workers-1 {
			share := p.nparts * (w + 1) / workers
			to = sort.Search(len(p.members), func(m int) bool { return sl.offs[m+1] >= share })
			to = max(to+1, from)
		}
		lo := from
		from = to
		if w == workers-1 {
			errs[w] = p.emitRange(sl, lo, to, w, emit, &failed)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = p.emitRange(sl, lo, to, w, emit, &failed)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// minPartsPerWorker keeps small plans on one goroutine.
var minPartsPerWorker = 1 << 16 // a variable for tests

// emitRange cuts and emits members [lo, hi) of the plan as worker w,
// stopping when emit fails here or (failed) in another worker.
func (p *problem) emitRange(sl *slots, lo, hi, w int, emit func(w, i int, a assign.Assignment) error, failed *atomic.Bool) error {
	var runs []assign.TopicPartitions
	for mi := lo; mi < hi; mi++ {
		if failed != nil && failed.Load() {
			return nil
		}
		runs = p.cut(sl.member(mi), runs[:0])
		var tps []assign.TopicPartitions
		if len(runs) > 0 {
			tps = runs
		}
		if err := emit(w, int(p.orig[mi]), assign.Assignment{Partitions: tps}); err != nil {
			if failed != nil {
				failed.Store(true)
			}
			return err
		}
	}
	return nil
}

// problem is the group flattened: members sorted by ID, the subscribed
// topics sorted by name, and every partition numbered consecutively
// (partNum = topic base + partition).
type problem struct {
	members []*assign.Member // sorted by ID
	orig    []int32          // orig[i]: index of members[i] in the caller's slice
	names   []string         // topic names, sorted
	bases   []int32          // bases[t] = first partNum of topic t; bases[len] = total
	topicOf map[string]int32
	nparts  int

	classes []class
	classOf []int32 // topic -> class

	// owner[partNum] is the previous owner after conflict resolution, if it
	// is still subscribed to the partition's topic, else -1.
	owner []int32
	// now holds what members report owning right now (cooperative only).
	now *claimSet
}

// class is the set of subscribed partitions whose topics have exactly the
// same subscribers.
type class struct {
	members  []int32 // member indices, ascending
	topics   []int32 // topic indices, ascending
	n        int     // number of partitions
	arcStart int     // first arc; arc arcStart+k links this class to members[k]
}

const (
	noClaim    = -1
	manyClaims = -2
)

func newProblem(members []assign.Member, topics map[string]assign.Topic) (*problem, error) {
	p := &problem{members: make([]*assign.Member, len(members)), orig: make([]int32, len(members))}
	for i := range p.orig {
		p.orig[i] = int32(i)
	}
	// The contract says members come sorted by ID; sort anyway (stably,
	// so that equal IDs are reported below rather than reordered).
	if !slices.IsSortedFunc(members, func(a, b assign.Member) int { return strings.Compare(a.ID, b.ID) }) {
		slices.SortStableFunc(p.orig, func(a, b int32) int { return strings.Compare(members[a].ID, members[b].ID) })
	}
	for i, o := range p.orig {
		p.members[i] = &members[o]
	}
	for i := 1; i < len(p.members); i++ {
		if p.members[i].ID == p.members[i-1].ID {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateMember, p.members[i].ID)
		}
	}

	// Members with the same topic list form a subscription group; topics
	// with the same subscriber set are then exactly the topics with the
	// same set of groups, so subscriber sets are built once per class
	// rather than once per topic.
	var groups [][]string // topic list of each group
	var inGroup [][]int32 // members of each group, ascending
	byList := make(map[string]int32)
	var key []byte
	g := int32(-1)
	for mi, m := range p.members {
		if mi == 0 || !sameList(m.Topics, p.members[mi-1].Topics) {
			key = key[:0]
			for _, name := range m.Topics {
				key = binary.AppendUvarint(key, uint64(len(name)))
				key = append(key, name...)
			}
			var ok bool
			if g, ok = byList[string(key)]; !ok {
				g = int32(len(groups))
				byList[string(key)] = g
				groups = append(groups, m.Topics)
				inGroup = append(inGroup, nil)
			}
		}
		inGroup[g] = append(inGroup[g], int32(mi))
	}

	// The topics that exist, have partitions and are subscribed to.
	p.topicOf = make(map[string]int32)
	for _, list := range groups {
		for _, name := range list {
			if t, ok := topics[name]; ok && t.Partitions > 0 {
				p.topicOf[name] = 0
			}
		}
	}
	p.names = make([]string, 0, len(p.topicOf))
	for name := range p.topicOf {
		p.names = append(p.names, name)
	}
	slices.Sort(p.names)
	p.bases = make([]int32, len(p.names)+1)
	total := 0
	for i, name := range p.names {
		p.topicOf[name] = int32(i)
		p.bases[i] = int32(total)
		total += int(topics[name].Partitions)
		if total > math.MaxInt32 {
			return nil, errors.New("sticky: more than 2^31-1 partitions")
		}
	}
	p.bases[len(p.names)] = int32(total)
	p.nparts = total

	// Groups subscribed to every topic, ascending, without duplicates.
	subs := make([][]int32, len(p.names))
	seen := make([]int32, len(p.names))
	for i := range seen {
		seen[i] = -1
	}
	for gi, list := range groups {
		for _, name := range list {
			if t, ok := p.topicOf[name]; ok && seen[t] != int32(gi) {
				seen[t] = int32(gi)
				subs[t] = append(subs[t], int32(gi))
			}
		}
	}

	// Topics with identical subscriber sets form one class.
	p.classOf = make([]int32, len(p.names))
	classByKey := make(map[string]int32)
	arcs := 0
	for t, list := range subs {
		key = key[:0]
		for _, gi := range list {
			key = binary.AppendUvarint(key, uint64(gi))
		}
		c, ok := classByKey[string(key)]
		if !ok {
			c = int32(len(p.classes))
			classByKey[string(key)] = c
			members := inGroup[list[0]]
			if len(list) > 1 {
				members = nil
				for _, gi := range list {
					members = append(members, inGroup[gi]...)
				}
				slices.Sort(members)
			}
			p.classes = append(p.classes, class{members: members, arcStart: arcs})
			arcs += len(members)
		}
		p.classOf[t] = c
		cl := &p.classes[c]
		cl.topics = append(cl.topics, int32(t))
		cl.n += int(p.bases[t+1] - p.bases[t])
	}
	return p, nil
}

// sameList reports whether two topic lists are equal, without comparing
// the names when both are the same slice.
func sameList(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// claim is what a member says it owns: the partitions of its
// subscription's owned list, or (userData non-nil) those of its sticky user
// data, already checked to be well formed; gen is the generation of that,
// and now tells whether it comes from the owned partitions (what the member
// owns right now) rather than from user data (which, for eager members, is
// what they owned before revoking everything).
type claim struct {
	owned    []assign.TopicPartitions
	userData []byte
	gen      int32
	now      bool
}

func claims(m *assign.Member, cooperative bool) claim {
	if len(m.Owned) > 0 {
		gen := m.Generation
		if gen < 0 {
			gen = cooperativeGeneration(m.UserData)
		}
		return claim{owned: m.Owned, gen: gen, now: true}
	}
	if cooperative && m.Generation >= 0 {
		// Subscription v2+ says it owns nothing in this generation.
		return claim{gen: m.Generation, now: true}
	}
	gen, err := walkUserData(m.UserData, nil)
	if err != nil || len(m.UserData) == 0 {
		return claim{gen: -1} // malformed: no history, as Kafka does
	}
	return claim{userData: m.UserData, gen: gen}
}

// claimSet records, per partition, who claims it at the highest generation.
//
// A scattered previous plan makes the claims land at random places in
// per-partition arrays of millions of entries, where every access misses
// the caches and the TLB. So the common case touches as little as it can:
// a bitmap of claimed partitions (an eighth of a megabyte per million
// partitions, which stays in the cache) and one store into top; a member's
// claims all carry its generation, which is kept per member, not per
// partition. Only a partition claimed twice reads top back.
type claimSet struct {
	seen []uint64          // bit p: partition p has a claim
	top  []int32           // where seen: member, or manyClaims when several tie
	gen  []int32           // member -> the generation of its claims
	tied map[int32][]int32 // the tied members, for manyClaims
}

func newClaimSet(nparts, nmembers int) *claimSet {
	return &claimSet{
		seen: make([]uint64, (nparts+63)/64),
		top:  make([]int32, nparts),
		gen:  make([]int32, nmembers),
	}
}

// at returns the member claiming part at the highest generation, noClaim
// or manyClaims.
func (c *claimSet) at(part int32) int32 {
	if c.seen[part>>6]&(1<<(part&63)) == 0 {
		return noClaim
	}
	return c.top[part]
}

// add records that member m claims part at generation gen (the same for
// all of m's claims).
func (c *claimSet) add(part, m, gen int32) {
	c.gen[m] = gen
	if w, bit := part>>6, uint64(1)<<(part&63); c.seen[w]&bit == 0 {
		c.seen[w] |= bit
		c.top[part] = m
		return
	}
	top := c.top[part]
	topGen := gen
	if top >= 0 {
		topGen = c.gen[top]
	} else {
		topGen = c.gen[c.tied[part][0]]
	}
	switch {
	case gen > topGen:
		if top == manyClaims {
			delete(c.tied, part)
		}
		c.top[part] = m
	case gen < topGen || top == m:
		// stale, or a repeated claim
	case top >= 0:
		if c.tied == nil {
			c.tied = make(map[int32][]int32)
		}
		c.tied[part] = []int32{top, m}
		c.top[part] = manyClaims
	default: // manyClaims at the same generation
		if !slices.Contains(c.tied[part], m) {
			c.tied[part] = append(c.tied[part], m)
		}
	}
}

// eachClaim calls fn for every valid claimed partition of every member
// whose claims pass the filter. User data is read in place.
func (p *problem) eachClaim(cooperative bool, filter func(ownedNow bool) bool, fn func(part, m, gen int32, now bool)) {
	for mi, m := range p.members {
		c := claims(m, cooperative)
		if !filter(c.now) {
			continue
		}
		for _, tp := range c.owned {
			t, ok := p.topicOf[tp.Topic]
			if !ok {
				continue
			}
			base, n := p.bases[t], p.bases[t+1]-p.bases[t]
			for _, part := range tp.Partitions {
				if part < 0 || part >= n {
					continue // a partition that does not exist
				}
				fn(base+part, int32(mi), c.gen, c.now)
			}
		}
		if c.userData == nil {
			continue
		}
		next := 0
		walkUserData(c.userData, func(topic, parts []byte) {
			t, ok := p.lookup(topic, &next)
			if !ok {
				return
			}
			base, n := p.bases[t], p.bases[t+1]-p.bases[t]
			for k := 0; k < len(parts); k += 4 {
				part := int32(binary.BigEndian.Uint32(parts[k:]))
				if part < 0 || part >= n {
					continue
				}
				fn(base+part, int32(mi), c.gen, false)
			}
		})
	}
}

// lookup returns the index of a topic named in user data. Writers list
// topics sorted by name (Kafka's clients, franz-go, sarama and cohort do),
// as p.names is, so a member's entries are looked for from where the
// previous one was found (*next) onwards, a few steps forward; the map
// answers names found out of order or not subscribed.
func (p *problem) lookup(topic []byte, next *int) (int32, bool) {
	names := p.names
	for i := *next; i < len(names) && i < *next+4; i++ {
		switch {
		case names[i] == string(topic):
			*next = i + 1
			return int32(i), true
		case names[i] > string(topic):
			i = len(names) // not ahead of next
		}
	}
	t, ok := p.topicOf[string(topic)]
	if ok {
		*next = int(t) + 1
	}
	return t, ok
}

// resolveOwners settles every partition's previous owner from the members'
// claims (KIP-341: the highest generation wins; a tie at the highest
// generation leaves the partition without a previous owner). For the
// cooperative variant it also records what members own right now.
func (p *problem) resolveOwners(cooperative bool) {
	var all *claimSet
	fromUserData := false
	p.eachClaim(cooperative, func(bool) bool { return true }, func(part, m, gen int32, now bool) {
		if all == nil {
			all = newClaimSet(p.nparts, len(p.members))
		}
		fromUserData = fromUserData || !now
		all.add(part, m, gen)
	})
	if cooperative {
		if !fromUserData {
			p.now = all
		} else {
			p.eachClaim(cooperative, func(now bool) bool { return now }, func(part, m, gen int32, _ bool) {
				if p.now == nil {
					p.now = newClaimSet(p.nparts, len(p.members))
				}
				p.now.add(part, m, gen)
			})
		}
	}
	if all == nil {
		p.owner = make([]int32, p.nparts)
		for i := range p.owner {
			p.owner[i] = -1
		}
		return
	}
	// The winner is the previous owner only if it may keep the partition.
	// owner is filtered in place from the claims' winners (every
	// partition belongs to one class), unless p.now still needs them.
	owner := all.top
	if p.now == all {
		owner = slices.Clone(all.top)
	}
	seen := all.seen
	pos := make([]int32, len(p.members))
	for i := range pos {
		pos[i] = -1
	}
	for ci := range p.classes {
		c := &p.classes[ci]
		for k, m := range c.members {
			pos[m] = int32(k)
		}
		for _, t := range c.topics {
			for part := p.bases[t]; part < p.bases[t+1]; part++ {
				if seen[part>>6]&(1<<(part&63)) == 0 {
					owner[part] = -1
				} else if w := owner[part]; w < 0 || pos[w] < 0 {
					owner[part] = -1
				}
			}
		}
		for _, m := range c.members {
			pos[m] = -1
		}
	}
	p.owner = owner
}

// heldElsewhere reports whether a member other than m owns part now while
// m does not own it at the highest claimed generation: handing part to m
// could make two members consume it.
func (p *problem) heldElsewhere(part, m int32) bool {
	if p.now == nil {
		return false
	}
	switch top := p.now.at(part); top {
	case noClaim, m:
		return false
	case manyClaims:
		return !slices.Contains(p.now.tied[part], m)
	default:
		return true
	}
}

// materialize turns the per-class counts of the solver into partitions:
// each member first keeps its previously owned partitions up to its count
// in the class, then takes the class's remaining partitions in order.
func (p *problem) materialize(s *solver, cooperative bool) *slots {
	nm := len(p.members)
	sl := p.newSlots(s)
	give := func(m, part int32) {
		if cooperative && p.heldElsewhere(part, m) {
			return // to be revoked by its owner first
		}
		sl.put(m, part)
	}

	pos := make([]int32, nm)
	for i := range pos {
		pos[i] = -1
	}
	var keep []int32
	owner := p.owner // marked -1 below where the owner does not keep it
	for ci := range p.classes {
		c := &p.classes[ci]
		for k, m := range c.members {
			pos[m] = int32(k)
		}
		keep = keep[:0]
		for k := range c.members {
			a := c.arcStart + k
			keep = append(keep, min(s.x[a], s.o[a]))
		}
		for _, t := range c.topics {
			for part := p.bases[t]; part < p.bases[t+1]; part++ {
				if w := owner[part]; w >= 0 {
					if k := pos[w]; keep[k] > 0 {
						keep[k]--
						give(w, part)
						continue
					}
					owner[part] = -1
				}
			}
		}
		// The pool, the class's partitions nobody kept, goes in order
		// to the members that take some: a second pass over owner
		// rather than a copy (the pool is the whole class when there is
		// no history).
		k, take := -1, 0
		for _, t := range c.topics {
			for part := p.bases[t]; part < p.bases[t+1]; part++ {
				if owner[part] >= 0 {
					continue
				}
				for take == 0 {
					k++
					a := c.arcStart + k
					take = int(s.x[a] - min(s.x[a], s.o[a]))
				}
				give(c.members[k], part)
				take--
			}
		}
		for _, m := range c.members {
			pos[m] = -1
		}
	}

	return sl
}

// slots is the plan being built: member m holds the partition numbers
// buf[offs[m]:fill[m]], with room up to offs[m+1] (its solver load).
type slots struct {
	buf        []int32
	offs, fill []int
}

func (p *problem) newSlots(s *solver) *slots {
	nm := len(p.members)
	sl := &slots{buf: make([]int32, p.nparts), offs: make([]int, nm+1)}
	for m := 0; m < nm; m++ {
		sl.offs[m+1] = sl.offs[m] + int(s.load[m])
	}
	sl.fill = slices.Clone(sl.offs[:nm])
	return sl
}

func (sl *slots) put(m, part int32) {
	sl.buf[sl.fill[m]] = part
	sl.fill[m]++
}

func (sl *slots) member(m int) []int32 { return sl.buf[sl.offs[m]:sl.fill[m]] }

// topicAt returns the topic of partition number part, searching from topic
// t on (part is not below t's first partition): the walks below visit a
// member's partitions in ascending order.
func (p *problem) topicAt(part int32, t int) int {
	if part < p.bases[t+1] {
		return t
	}
	return t + 1 + sort.Search(len(p.names)-t-1, func(k int) bool { return p.bases[t+2+k] > part })
}

// cut sorts a member's partition numbers in place, renumbers them per
// topic and appends one entry per topic to dst, each entry's partitions a
// subslice of parts.
func (p *problem) cut(parts []int32, dst []assign.TopicPartitions) []assign.TopicPartitions {
	slices.Sort(parts)
	t := 0
	for len(parts) > 0 {
		t = p.topicAt(parts[0], t)
		end, limit := 1, p.bases[t+1]
		for end < len(parts) && parts[end] < limit {
			end++
		}
		chunk := parts[:end:end]
		base := p.bases[t]
		for i := range chunk {
			chunk[i] -= base
		}
		dst = append(dst, assign.TopicPartitions{Topic: p.names[t], Partitions: chunk})
		parts = parts[end:]
	}
	return dst
}

// output cuts the slots into the members' assignments. The topic entries
// of all members share one allocation.
func (p *problem) output(sl *slots) map[string]assign.Assignment {
	out := make(map[string]assign.Assignment, len(p.members))
	runs := 0
	for mi := range p.members {
		parts := sl.member(mi)
		slices.Sort(parts)
		for i, t := 0, -1; i < len(parts); i++ {
			if t < 0 || parts[i] >= p.bases[t+1] {
				t = p.topicAt(parts[i], max(t, 0))
				runs++
			}
		}
	}
	all := make([]assign.TopicPartitions, 0, runs)
	for mi, m := range p.members {
		start := len(all)
		all = p.cut(sl.member(mi), all)
		var tps []assign.TopicPartitions
		if len(all) > start {
			tps = all[start:len(all):len(all)]
		}
		out[m.ID] = assign.Assignment{Partitions: tps}
	}
	return out
}

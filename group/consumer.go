package group

import (
	"slices"
	"sort"
	"time"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/consumer/serverassign"
)

// This file holds the state of consumer-protocol groups (KIP-848): the group
// type whose members send ConsumerGroupHeartbeat and get their partitions
// from the coordinator, which computes a target assignment with a
// server-side assignor and reconciles each member towards it. See
// docs/kip848.md for the protocol as cohort implements it.
//
// Unlike a classic group, whose handlers change the live state and write
// records that are replayed once durable, a consumer group changes only by
// replaying records: a handler computes the records of a change and replays
// them at once (so that the next request sees the change), then writes them.
// If that write fails, the shard asks to be reloaded from the store
// (Shard.NeedsReload), which drops whatever was not durable. Loading replays
// the same records through the same function.

// Topics is the topic metadata consumer groups are assigned from: cohort's
// catalog (*catalog.Catalog implements it).
type Topics interface {
	Lookup(name string) (catalog.Topic, bool)
	LookupID(id [16]byte) (catalog.Topic, bool)
	// Range calls fn for every topic in name order until fn returns false.
	Range(fn func(t *catalog.Topic) bool)
	// Version changes whenever a topic is created, grown or deleted.
	Version() uint64
}

// TopicAccess decides which topics a regex may give a member (see
// Config.TopicAccess). The shard asks it on its goroutine, once per regex,
// principal and host for each version: it must be cheap and never block.
type TopicAccess interface {
	// Version changes whenever a CanDescribe answer may have changed (an ACL
	// was created or deleted).
	Version() uint64
	// CanDescribe reports whether principal, connecting from host (an IP
	// address), may DESCRIBE the topic.
	CanDescribe(principal, host, topic string) bool
}

// memberState is where a consumer-protocol member is in its reconciliation.
type memberState int8

const (
	mStable      memberState = 0   // owns its share of the target at the assignment epoch
	mUnrevoked   memberState = 1   // must revoke partitions before it advances
	mUnreleased  memberState = 2   // waits for partitions another member still holds
	mUnknown     memberState = 127 // state not known (never written by cohort)
	epochLeave   int32       = -1  // MemberEpoch of a leaving member
	epochStatic  int32       = -2  // MemberEpoch of a static member that left temporarily
	epochJoining int32       = 0
)

var memberStateNames = map[memberState]string{mStable: "STABLE", mUnrevoked: "UNREVOKED_PARTITIONS",
	mUnreleased: "UNRELEASED_PARTITIONS", mUnknown: "UNKNOWN"}

func (s memberState) String() string {
	if n, ok := memberStateNames[s]; ok {
		return n
	}
	return "UNKNOWN"
}

// tpset is a set of partitions: topic name -> sorted partitions.
type tpset map[string][]int32

func (s tpset) clone() tpset {
	if s == nil {
		return nil
	}
	c := make(tpset, len(s))
	for t, ps := range s {
		c[t] = slices.Clone(ps)
	}
	return c
}

func (s tpset) topics() []string {
	ts := make([]string, 0, len(s))
	for t := range s {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

func (s tpset) has(t string, p int32) bool {
	_, ok := slices.BinarySearch(s[t], p)
	return ok
}

func (s tpset) size() int {
	n := 0
	for _, ps := range s {
		n += len(ps)
	}
	return n
}

func (s tpset) equal(o tpset) bool {
	if s.size() != o.size() {
		return false
	}
	for t, ps := range s {
		if !slices.Equal(ps, o[t]) {
			return false
		}
	}
	return true
}

// addAll puts ps (any order, duplicates allowed) of topic t into s, with
// one map access per call rather than per partition: a request or a member
// state of a thousand partitions went through add at two string-keyed map
// operations each.
func (s tpset) addAll(t string, ps []int32) {
	if len(ps) == 0 {
		return
	}
	cur := s[t]
	if len(cur) == 0 && isStrictlyAscending(ps) {
		s[t] = slices.Clone(ps)
		return
	}
	merged := make([]int32, 0, len(cur)+len(ps))
	merged = append(append(merged, cur...), ps...)
	slices.Sort(merged)
	s[t] = slices.Compact(merged)
}

// addSet adds every partition of o to s.
func (s tpset) addSet(o tpset) {
	for t, ps := range o {
		s.addAll(t, ps)
	}
}

func isStrictlyAscending(ps []int32) bool {
	for i := 1; i < len(ps); i++ {
		if ps[i] <= ps[i-1] {
			return false
		}
	}
	return true
}

// add puts p of topic t into s (kept sorted).
func (s tpset) add(t string, p int32) {
	ps := s[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		s[t] = slices.Insert(ps, i, p)
	}
}

// cmember is one member of a consumer-protocol group.
type cmember struct {
	id         string
	instanceID string // static membership, "" if dynamic
	rack       string
	clientID   string
	clientHost string
	// principal is the principal of the member's last consumer-protocol
	// heartbeat: its regex gives it only what this principal may describe
	// (Config.TopicAccess). "" for a classic member.
	principal string
	// rebalanceTimeout bounds how long the member may take to revoke.
	rebalanceTimeout time.Duration
	names            []string // subscribed topic names, sorted
	regex            string   // subscribed regular expression, "" if none
	assignor         string   // the server assignor it asked for last, "" if none

	epoch     int32 // member epoch
	prevEpoch int32
	state     memberState
	assigned  tpset // owned partitions the member may use
	pending   tpset // owned partitions it must revoke
	// assignedAt holds, per assigned or pending partition, the target epoch
	// it was given to the member at (KIP-1251: commits at an older epoch are
	// accepted for a partition given at or before that epoch).
	assignedAt map[topicPartition]int32

	// classic is set for a member that speaks the classic protocol
	// (JoinGroup/SyncGroup/Heartbeat) in a consumer-protocol group.
	classic *classicMeta

	session *timer
	// sessionSpan is the session timeout session was last armed for
	// (armSession): the silence shown (LastHeardTag) is measured from it,
	// which stays right when the group's session timeout changes before
	// the member's next heartbeat.
	sessionSpan time.Duration
	rebalance   *timer
	// classicTimer fences a classic member that does not send its
	// SyncGroup after a JoinGroup, or its JoinGroup after being told to
	// rejoin, within its rebalance timeout.
	classicTimer *timer
	// rebalanceEpoch is the member epoch when the rebalance timer was armed:
	// it fences the member only if it has not advanced since.
	rebalanceEpoch int32
	// changedAt is when reconcile last changed the member's epoch, state or
	// partitions (Shard.heartbeatInterval); zero before the first. Not
	// stored: after a load it starts over, which only shortens the next
	// interval answered.
	changedAt time.Time
	// awayAt is when the member left for a restart (epoch -2), for the
	// history's "now" view. Not stored: zero after a load.
	awayAt time.Time
}

// consumerGroup is the consumer-protocol state of a group (Group.cg).
type consumerGroup struct {
	epoch       int32  // group epoch: bumped whenever a new target is needed
	assignEpoch int32  // the group epoch the target was computed at
	hash        uint64 // metadata hash of the subscribed topics at the last bump
	// hashVersion and hashAccess are the Topics and TopicAccess versions
	// hash was computed at; the hash is recomputed (and the epoch bumped if
	// it changed) when either differs.
	hashVersion, hashAccess uint64

	members map[string]*cmember
	ids     []string          // member ids, sorted: deterministic iteration
	static  map[string]string // instance id -> member id
	target  map[string]tpset  // member id -> target assignment
	// owner maps every partition some member holds (assigned or pending)
	// to that member: no partition goes to a new owner while held.
	owner ownerIndex
	// subscribers counts, per topic name, the members subscribing to it by
	// name; regexes of the members resolve into resolved.
	subscribers map[string]int
	regexes     map[string]int // regex -> members using it
	// regexCache holds, for each regex in regexes, its compiled form and
	// matches (regexTopics).
	regexCache map[string]*regexMatch
	// access counts the regex members per regex, principal and host;
	// accessCache holds what each such key may be given of its regex's
	// matches (allowedTopics), with Config.TopicAccess set.
	access      map[accessKey]int
	accessCache map[accessKey]*accessMatch
	// s and id: the shard and group id, for the regex jobs (regexTopics).
	s  *Shard
	id string
	// subsDirty: the subscriptions changed since the hash was computed.
	subsDirty bool
	// subsCache is subscribedNow's answer, valid for subsCacheVersion of
	// the topics while subsCacheDirty is false.
	subsCache        map[string]bool
	subsCacheVersion uint64
	subsCacheAccess  uint64
	subsCacheDirty   bool
	// hist follows the rebalance in progress (historycg.go).
	hist cHistory
	// assignedAt is when the target was last computed: zero before the
	// first computation, after the group emptied, and after a load (it is
	// not stored). assignTimer computes a deferred target (bumpAndAssign).
	assignedAt  time.Time
	assignTimer *timer
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members:     map[string]*cmember{},
		static:      map[string]string{},
		target:      map[string]tpset{},
		subscribers: map[string]int{},
		regexes:     map[string]int{},
		access:      map[accessKey]int{},
	}
}

// hasStaticMember reports whether a member of the group holds instance.
func (cg *consumerGroup) hasStaticMember(instance string) bool {
	_, ok := cg.static[instance]
	return instance != "" && ok
}

// consumerState names the group's state as Kafka reports it for consumer
// groups: Empty (no members), Assigning (the target is behind the group
// epoch), Reconciling (some member has not reached the target), Stable.
func (cg *consumerGroup) state() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.assignEpoch < cg.epoch:
		return "Assigning"
	}
	for _, id := range cg.ids {
		m := cg.members[id]
		if m.state != mStable || m.epoch != cg.assignEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

// converging reports whether the group's present members are still on their
// way to the target: it is being computed, or a member has not reached it.
// Unlike state, it leaves out static members away (epoch -2): they hold their
// partitions until they come back or their session ends, and the others have
// nothing to wait for meanwhile (heartbeatInterval).
func (cg *consumerGroup) converging() bool {
	if len(cg.members) == 0 {
		return false
	}
	if cg.assignEpoch < cg.epoch {
		return true
	}
	for _, id := range cg.ids {
		m := cg.members[id]
		if m.epoch != epochStatic && (m.state != mStable || m.epoch != cg.assignEpoch) {
			return true
		}
	}
	return false
}

// subscribed returns the topics some member subscribes to that exist, by
// name or through a regex (what the regex may give its members, see
// memberRegexTopics), sorted.
func (cg *consumerGroup) subscribed(topics Topics) []string {
	set := map[string]struct{}{}
	for name := range cg.subscribers {
		if _, ok := topics.Lookup(name); ok {
			set[name] = struct{}{}
		}
	}
	if acc := cg.topicAccess(); acc != nil {
		for k := range cg.access {
			for _, name := range cg.allowedTopics(k, topics, acc) {
				set[name] = struct{}{}
			}
		}
	} else {
		for expr := range cg.regexes {
			for _, name := range cg.regexTopics(expr, topics) {
				set[name] = struct{}{}
			}
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// subscribedNow returns the set of subscribed existing topics (see
// subscribed), cached until the subscriptions, the topics or the ACLs
// change.
func (cg *consumerGroup) subscribedNow(topics Topics) map[string]bool {
	v, av := topics.Version(), cg.accessVersion()
	if cg.subsCache == nil || cg.subsCacheVersion != v || cg.subsCacheAccess != av || cg.subsCacheDirty {
		cg.subsCache = map[string]bool{}
		for _, t := range cg.subscribed(topics) {
			cg.subsCache[t] = true
		}
		cg.subsCacheVersion, cg.subsCacheAccess, cg.subsCacheDirty = v, av, false
	}
	return cg.subsCache
}

// protects reports whether the group is subscribed to topic for the
// purposes of its offsets (OffsetDelete refuses, retention skips them): a
// member subscribes to it by name, whether or not it exists (as Kafka,
// whose test is the set of subscribed names), or a regex gives it.
func (cg *consumerGroup) protects(topic string, topics Topics) bool {
	return cg.subscribers[topic] > 0 || cg.subscribedNow(topics)[topic]
}

// memberTopics returns the existing topics m subscribes to, sorted.
func (cg *consumerGroup) memberTopics(m *cmember, topics Topics) []string {
	var out []string
	for _, name := range m.names {
		if _, ok := topics.Lookup(name); ok {
			out = append(out, name)
		}
	}
	if m.regex != "" {
		for _, name := range cg.memberRegexTopics(m, topics) {
			if _, dup := slices.BinarySearch(m.names, name); !dup {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// preferredAssignor is the assignor most members asked for (ties go to the
// one configured first), or the first configured when nobody asked.
func (cg *consumerGroup) preferredAssignor(configured []string) string {
	votes := map[string]int{}
	for _, id := range cg.ids {
		if a := cg.members[id].assignor; a != "" {
			votes[a]++
		}
	}
	best, bestVotes := configured[0], 0
	for _, name := range configured {
		if v := votes[name]; v > bestVotes {
			best, bestVotes = name, v
		}
	}
	return best
}

// metadataHash summarises the subscribed topics' metadata (name, id,
// partition count, racks): a change bumps the group epoch so that the target
// covers created, grown and deleted topics.
func metadataHash(names []string, topics Topics) uint64 {
	h := uint64(14695981039346656037) // FNV-1a
	mix := func(b byte) { h ^= uint64(b); h *= 1099511628211 }
	for _, name := range names {
		t, ok := topics.Lookup(name)
		if !ok {
			continue
		}
		for i := 0; i < len(name); i++ {
			mix(name[i])
		}
		mix(0)
		for _, b := range t.ID {
			mix(b)
		}
		for i := 0; i < 4; i++ {
			mix(byte(t.Partitions >> (8 * i)))
		}
		for _, rs := range t.Racks {
			for _, r := range rs {
				for i := 0; i < len(r); i++ {
					mix(r[i])
				}
				mix(1)
			}
			mix(2)
		}
	}
	return h
}

// assignorMembers returns the assignor's view of the members.
func (cg *consumerGroup) assignorMembers(topics Topics) []serverassign.Member {
	ms := make([]serverassign.Member, 0, len(cg.ids))
	for _, id := range cg.ids {
		m := cg.members[id]
		ms = append(ms, serverassign.Member{ID: m.id, InstanceID: m.instanceID, Rack: m.rack, Topics: cg.memberTopics(m, topics)})
	}
	return ms
}

// indexMember adds or removes m's subscriptions from the group's counts.
func (cg *consumerGroup) indexMember(m *cmember, delta int) {
	cg.subsDirty, cg.subsCacheDirty = true, true
	for _, n := range m.names {
		cg.subscribers[n] += delta
		if cg.subscribers[n] <= 0 {
			delete(cg.subscribers, n)
		}
	}
	if m.regex != "" {
		cg.regexes[m.regex] += delta
		if cg.regexes[m.regex] <= 0 {
			delete(cg.regexes, m.regex)
			delete(cg.regexCache, m.regex)
		}
		k := accessOf(m)
		cg.access[k] += delta
		if cg.access[k] <= 0 {
			delete(cg.access, k)
			delete(cg.accessCache, k)
		}
	}
}

// hold records m as the holder of its assigned and pending partitions.
func (cg *consumerGroup) hold(m *cmember) {
	for _, set := range []tpset{m.assigned, m.pending} {
		for t, ps := range set {
			cg.owner.setAll(t, ps, m.id)
		}
	}
}

// release forgets m as the holder of its partitions.
func (cg *consumerGroup) release(m *cmember) {
	for _, set := range []tpset{m.assigned, m.pending} {
		for t, ps := range set {
			for _, p := range ps {
				cg.owner.drop(t, p, m.id)
			}
		}
	}
}

// ownerIndex maps every partition some member holds to that member. A
// partition below ownerDense is a slot of its topic's slice (no hashing: a
// member's record replays release and hold all its partitions, a thousand
// for one member of a new group); others, which only a classic member's
// assignment bytes can name, go to a map. A topic whose last held
// partition is released is forgotten: a group outlives the topics it
// consumes (a regex over short-lived topics), and kept a slice for every
// topic its members had ever held.
type ownerIndex struct {
	dense  map[string]*ownerSlots
	sparse map[topicPartition]string
}

// ownerSlots are one topic's holders by partition ("" for none) and how
// many partitions are held.
type ownerSlots struct {
	holder []string
	held   int
}

const ownerDense = 1 << 16

func (o *ownerIndex) get(t string, p int32) (string, bool) {
	if p >= 0 && p < ownerDense {
		if s := o.dense[t]; s != nil && int(p) < len(s.holder) && s.holder[p] != "" {
			return s.holder[p], true
		}
		return "", false
	}
	id, ok := o.sparse[topicPartition{t, p}]
	return id, ok
}

// setAll makes id (not "") the holder of ps (sorted) of topic t.
func (o *ownerIndex) setAll(t string, ps []int32, id string) {
	if len(ps) == 0 {
		return
	}
	var s *ownerSlots
	if hi := ps[len(ps)-1]; ps[0] >= 0 && hi < ownerDense {
		s = o.topic(t, hi)
	}
	for _, p := range ps {
		if s != nil {
			s.put(p, id)
		} else {
			o.set(t, p, id)
		}
	}
}

// set makes id (not "") the holder of partition p of topic t.
func (o *ownerIndex) set(t string, p int32, id string) {
	if p >= 0 && p < ownerDense {
		o.topic(t, p).put(p, id)
		return
	}
	mapPut(&o.sparse, topicPartition{t, p}, id)
}

func (s *ownerSlots) put(p int32, id string) {
	if s.holder[p] == "" {
		s.held++
	}
	s.holder[p] = id
}

// topic is t's slots, long enough for partition hi (< ownerDense).
func (o *ownerIndex) topic(t string, hi int32) *ownerSlots {
	s := o.dense[t]
	if s == nil {
		s = &ownerSlots{}
		if o.dense == nil {
			o.dense = map[string]*ownerSlots{}
		}
		o.dense[t] = s
	}
	if int(hi) < len(s.holder) {
		return s
	}
	n := max(int(hi)+1, min(2*len(s.holder), ownerDense))
	grown := make([]string, n)
	copy(grown, s.holder)
	s.holder = grown
	return s
}

// drop forgets p's holder if it is id, and the topic with its last holder.
func (o *ownerIndex) drop(t string, p int32, id string) {
	if p >= 0 && p < ownerDense {
		if s := o.dense[t]; s != nil && int(p) < len(s.holder) && s.holder[p] == id {
			s.holder[p] = ""
			if s.held--; s.held == 0 {
				delete(o.dense, t)
			}
		}
		return
	}
	if tp := (topicPartition{t, p}); o.sparse[tp] == id {
		mapDrop(&o.sparse, tp)
	}
}

func (cg *consumerGroup) insertID(id string) {
	i, ok := slices.BinarySearch(cg.ids, id)
	if !ok {
		cg.ids = slices.Insert(cg.ids, i, id)
	}
}

func (cg *consumerGroup) removeID(id string) {
	if i, ok := slices.BinarySearch(cg.ids, id); ok {
		cg.ids = slices.Delete(cg.ids, i, i+1)
	}
}

package group

import (
	"bytes"
	"encoding/binary"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a group's state. String gives Kafka's wire names.
type State int8

// Group states (docs/group-semantics.md §states).
const (
	Empty               State = iota // no members; may own offsets
	PreparingRebalance               // join barrier open
	CompletingRebalance              // generation bumped, waiting for the leader's SyncGroup
	Stable                           // assignment persisted and delivered
	Dead                             // being removed
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// ListedStates are the states a group can have in a ListGroups answer: a
// classic group's but Dead (a group being removed is never listed), then a
// consumer group's own, Assigning and Reconciling (it is otherwise Empty or
// Stable). The states cohort groups --state and the console's ?state= take.
func ListedStates() []string {
	return []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Assigning", "Reconciling"}
}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// parked is a request waiting for an answer.
type parked struct {
	t Ticket
	v int16 // request version, shapes the response
}

type member struct {
	id         string
	instanceID string // "" for dynamic members
	clientID   string
	clientHost string

	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration

	protocols  []kmsg.JoinGroupRequestProtocol // ordered, as last joined
	assignment []byte

	join *parked
	sync *parked
	// replacing is a static replacement's JoinGroup, answered once the new
	// member id is durable (replaceStatic); a later replacement fences it.
	replacing *parked

	// isNew marks a member added by a JoinGroup whose join phase has not
	// completed yet: its session timer is the new-member join timeout and
	// parking does not keep it alive.
	isNew bool
	// downgradedFrom is the member epoch a member of a consumer-protocol
	// group last learned when the group turned classic under it at another
	// generation (0: none); its Heartbeat at that epoch is told to rejoin
	// until the classic group's first join phase completes.
	downgradedFrom int32
	session        *timer
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protos equals the member's current protocols: same
// names, same order, byte-identical metadata.
func (m *member) matches(protos []kmsg.JoinGroupRequestProtocol) bool {
	if len(protos) != len(m.protocols) {
		return false
	}
	for i := range protos {
		if protos[i].Name != m.protocols[i].Name || !bytes.Equal(protos[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// Group is one group's state. Its fields are read through accessor methods;
// changes go through the Shard's request handlers.
type Group struct {
	s  *Shard
	id string

	// The small fields side by side (an idle group's size matters).
	generation     int32
	state          State
	initialDelay   bool // the join timer is the initial (from Empty) delay
	newMemberAdded bool
	syncWriting    bool // the leader's assignment is being persisted
	persisted      bool // a GroupMetadata record exists in the store
	downgraded     bool // members may carry downgradedFrom (maybeDowngrade)
	loadRebalance  bool // loaded from a record whose rebalance was pending (groupImage.rebalance); FinishLoad starts it
	metaWrites     int  // GroupMetadata writes in flight (writeMetadata)
	loaded         bool // see rb

	stateTime    time.Time
	protocolType string
	protocol     string // selected protocol; "" when none
	leader       string

	members []*member          // join order; deterministic iteration
	byID    map[string]*member // nil while the group has few members: see memberByID
	static  map[string]string  // instance id -> member id

	pending     map[string]*timer   // KIP-394 member ids awaiting their second JoinGroup
	pendingSync map[string]struct{} // members that have not synced this generation
	protoCount  protoCounts         // how many members list each protocol name
	awaiting    int                 // members parked in JoinGroup

	joinTimer        *timer
	syncTimer        *timer
	initialRemaining time.Duration // rebalance-timeout budget left for extensions
	initialStep      time.Duration // the current extension's length

	// subscribed is the union of topics the members subscribe to, parsed
	// from consumer-protocol metadata; nil when unknown (non-consumer
	// protocol, a subscription that could not be parsed, a group that has
	// not completed a generation yet), empty but not nil for a consumer
	// group whose last generation had no members (as Kafka: its next join
	// phase protects no topic from OffsetDelete).
	// A sorted slice: most groups subscribe to a few topics, and a map
	// costs ~400 bytes per idle group.
	subscribed []string

	offsets   offsetTable      // nil until the first offset (most idle groups of a classic workload have few)
	inflight  []inflightCommit // commits being written, in write order, for RequireStable and expiry
	commitSeq uint64

	// cg is the consumer-protocol (KIP-848) state of a consumer group; nil
	// for classic groups (and groups that only hold offsets).
	cg *consumerGroup

	// rb follows the rebalance in progress (historyrec.go); loaded (above):
	// the group was restored from the store and has not rebalanced since.
	rb *rbTracker
	// rbWriting is the rebalance whose event is being written with the
	// leader's assignment (rbAssigned): closed, but still the one the
	// waiting view tells of while the group is CompletingRebalance.
	rbWriting *rbTracker
	// evictions are the members timeouts removed recently, to link their
	// rejoins to (rejoin.go); nil when none (a pointer: most groups have
	// none, and an idle group's size matters).
	evictions *[]eviction
}

// mapPut and mapDrop keep a group's member maps (byID, static, pending,
// pendingSync) nil while they are empty: a map is made on its
// first insert and dropped when its last key is deleted. Most groups are
// idle with one member, and an emptied Go map keeps its table (a KIP-394
// pending id or an unsynced member leaves ~200 bytes behind per map).
// smallGroup is the most members a group finds by scanning its member list;
// above it, byID maps member ids. An idle one-member group then keeps no map
// (a one-entry map costs about 250 bytes, a tenth of an idle group).
const smallGroup = 8

// memberByID is the member with id, nil if none.
func (g *Group) memberByID(id string) *member {
	if g.byID != nil {
		return g.byID[id]
	}
	for _, m := range g.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// indexMember notes m, already in g.members, in byID once the group is
// too big to scan.
func (g *Group) indexMember(m *member) {
	switch {
	case g.byID != nil:
		g.byID[m.id] = m
	case len(g.members) > smallGroup:
		g.byID = make(map[string]*member, len(g.members))
		for _, x := range g.members {
			g.byID[x.id] = x
		}
	}
}

// unindexMember forgets id, already out of g.members (or renamed), and drops
// byID once the group is small enough to scan.
func (g *Group) unindexMember(id string) {
	if g.byID == nil {
		return
	}
	delete(g.byID, id)
	if len(g.members) <= smallGroup/2 {
		g.byID = nil
	}
}

func mapPut[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = make(map[K]V, 1)
	}
	(*m)[k] = v
}

func mapDrop[K comparable, V any](m *map[K]V, k K) {
	delete(*m, k)
	if len(*m) == 0 {
		*m = nil
	}
}

func (s *Shard) newGroup(id string, now time.Time) *Group {
	g := &Group{
		s:         s,
		id:        id,
		state:     Empty,
		stateTime: now,
	}
	s.groups[id] = g
	return g
}

// ID returns the group id.
func (g *Group) ID() string { return g.id }

// State returns the group's state.
func (g *Group) State() State { return g.state }

// Generation returns the current generation.
func (g *Group) Generation() int32 { return g.generation }

// Leader returns the leader's member id ("" when none).
func (g *Group) Leader() string { return g.leader }

// Protocol returns the selected protocol name ("" when none).
func (g *Group) Protocol() string { return g.protocol }

// ProtocolType returns the group's protocol type.
func (g *Group) ProtocolType() string { return g.protocolType }

// MemberIDs returns the member ids in join order.
func (g *Group) MemberIDs() []string {
	ids := make([]string, len(g.members))
	for i, m := range g.members {
		ids[i] = m.id
	}
	return ids
}

// Assignment returns a member's current assignment bytes.
func (g *Group) Assignment(memberID string) ([]byte, bool) {
	m := g.memberByID(memberID)
	if m == nil {
		return nil, false
	}
	return m.assignment, true
}

// NumPending returns the number of KIP-394 pending member ids.
func (g *Group) NumPending() int { return len(g.pending) }

// NumOffsets returns the number of committed offsets.
func (g *Group) NumOffsets() int { return g.offsets.len() }

func (g *Group) transition(to State, now time.Time) {
	g.state = to
	g.stateTime = now
}

func (g *Group) canRebalance() bool {
	return g.state == Empty || g.state == Stable || g.state == CompletingRebalance
}

func (g *Group) maxRebalanceTimeout() time.Duration {
	var max time.Duration
	for _, m := range g.members {
		if m.rebalanceTimeout > max {
			max = m.rebalanceTimeout
		}
	}
	return max
}

// supportsProtocols is Kafka's JoinGroup admission test. It goes by the
// state, as Kafka's does: a group that lost its last member during a
// rebalance keeps its protocol type until it is Empty.
func (g *Group) supportsProtocols(ptype string, protos []kmsg.JoinGroupRequestProtocol) bool {
	if g.state == Empty {
		return ptype != "" && len(protos) > 0
	}
	if ptype != g.protocolType {
		return false
	}
	for _, p := range protos {
		if g.protoCount.get(p.Name) == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol every member supports with the most
// votes, each member voting for the first candidate in its own list. Ties go
// to the candidate listed earliest by the leader (Kafka leaves ties to hash
// order; clients cannot rely on them).
func (g *Group) selectProtocol() string {
	n := len(g.members)
	if n == 0 {
		return ""
	}
	votes := make(map[string]int)
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.protoCount.get(p.Name) == n {
				votes[p.Name]++
				break
			}
		}
	}
	order := g.members[0].protocols
	if l := g.memberByID(g.leader); l != nil {
		order = l.protocols
	}
	best, bestVotes := "", -1
	for _, p := range order {
		if v, ok := votes[p.Name]; ok && v > bestVotes {
			best, bestVotes = p.Name, v
		}
	}
	return best
}

func cloneProtocols(in []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(in))
	for i, p := range in {
		out[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: append([]byte(nil), p.Metadata...)}
	}
	return out
}

func (g *Group) setProtocols(m *member, protos []kmsg.JoinGroupRequestProtocol) {
	eachName(m.protocols, func(name string) { g.protoCount.add(name, -1) })
	m.protocols = protos
	eachName(protos, func(name string) { g.protoCount.add(name, 1) }) // a name listed twice counts once
}

// eachName calls fn once per distinct protocol name of protos.
func eachName(protos []kmsg.JoinGroupRequestProtocol, fn func(string)) {
	if len(protos) > protoCountsFew {
		seen := make(map[string]bool, len(protos))
		for _, p := range protos {
			if !seen[p.Name] {
				seen[p.Name] = true
				fn(p.Name)
			}
		}
		return
	}
next:
	for i, p := range protos {
		for _, q := range protos[:i] {
			if q.Name == p.Name {
				continue next
			}
		}
		fn(p.Name)
	}
}

// protoCounts counts, per protocol name, the members that list it. The
// names of a group are few (usually one or two, shared by every member):
// they are kept in a short slice, and in a map only past protoCountsFew
// names, so that a group costs no map while a member listing many names
// stays cheap to count.
type protoCounts struct {
	few  []protoCount
	many map[string]int
}

type protoCount struct {
	name string
	n    int
}

const protoCountsFew = 8

func (c *protoCounts) get(name string) int {
	if c.many != nil {
		return c.many[name]
	}
	for _, pc := range c.few {
		if pc.name == name {
			return pc.n
		}
	}
	return 0
}

// add adds d to name's count, forgetting names whose count reaches 0.
func (c *protoCounts) add(name string, d int) {
	if c.many != nil {
		if c.many[name] += d; c.many[name] <= 0 {
			delete(c.many, name)
		}
		return
	}
	for i := range c.few {
		if c.few[i].name == name {
			if c.few[i].n += d; c.few[i].n <= 0 {
				c.few = slices.Delete(c.few, i, i+1)
				if len(c.few) == 0 {
					c.few = nil
				}
			}
			return
		}
	}
	if d <= 0 {
		return
	}
	if len(c.few) < protoCountsFew {
		c.few = append(c.few, protoCount{name, d})
		return
	}
	c.many = make(map[string]int, 2*protoCountsFew)
	for _, pc := range c.few {
		c.many[pc.name] = pc.n
	}
	c.many[name] = d
	c.few = nil
}

// addMember inserts m; the first member fixes the protocol type and the first
// member of a leaderless group leads.
func (g *Group) addMember(m *member, ptype string) {
	if len(g.members) == 0 {
		g.protocolType = ptype
	}
	protos := m.protocols
	m.protocols = nil
	g.members = append(g.members, m)
	g.indexMember(m)
	g.setProtocols(m, protos)
	if g.leader == "" {
		g.leader = m.id
	}
	if m.instanceID != "" {
		mapPut(&g.static, m.instanceID, m.id)
	}
	m.session = newTimer(func(now time.Time, out *Output) { g.onSessionExpired(now, m, out) })
}

func (g *Group) park(m *member, t Ticket, v int16, out *Output) {
	if m.join != nil {
		// The member joined again while its previous JoinGroup was parked
		// (a client retry on a new connection): the old request is
		// superseded; answer it so that nothing stays parked forever.
		out.reply(m.join.t, joinError(m.join.v, ErrRebalanceInProgress, m.id))
	} else {
		g.awaiting++
	}
	m.join = &parked{t, v}
}

// removeMember drops m (leave, session expiry, eviction): its parked JoinGroup
// gets UNKNOWN_MEMBER_ID, and the group rebalances or re-checks its barrier.
func (g *Group) removeMember(now time.Time, m *member, out *Output) {
	g.dropMember(m, out)
	g.afterRemoval(now, out)
}

// afterRemoval is the group's reaction to members leaving: a rebalance, or
// in one, a check of the join barrier (fewer members may now all be in).
func (g *Group) afterRemoval(now time.Time, out *Output) {
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance(now, out)
	case PreparingRebalance:
		g.tryCompleteJoin(now, out)
	}
}

// dropMember removes m from the group's books without triggering anything.
func (g *Group) dropMember(m *member, out *Output) {
	if m.join != nil {
		out.reply(m.join.t, joinError(m.join.v, ErrUnknownMemberID, ""))
		m.join = nil
		g.awaiting--
	}
	if m.sync != nil {
		out.reply(m.sync.t, syncError(m.sync.v, ErrUnknownMemberID))
		m.sync = nil
	}
	g.s.cancel(m.session)
	g.setProtocols(m, nil)
	for i, x := range g.members {
		if x == m {
			g.members = append(g.members[:i], g.members[i+1:]...)
			break
		}
	}
	g.unindexMember(m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		mapDrop(&g.static, m.instanceID)
	}
	mapDrop(&g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = ""
		if len(g.members) > 0 {
			g.leader = g.members[0].id
		}
	}
}

// prepareRebalance opens the join barrier (docs/group-semantics.md §join.prepare).
func (g *Group) prepareRebalance(now time.Time, out *Output) {
	g.rbPrepare(now)
	if g.state == CompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.sync != nil {
				out.reply(m.sync.t, syncError(m.sync.v, ErrRebalanceInProgress))
				m.sync = nil
				// Its session may have run out while it waited (a parked
				// member counts as alive): it starts afresh now that it
				// has an answer, as Kafka does, or an absent static
				// member could hold the group in PreparingRebalance
				// forever.
				g.s.arm(m.session, now.Add(m.sessionTimeout))
			}
		}
	}
	g.s.cancel(g.syncTimer)
	g.syncTimer = nil
	g.pendingSync = nil
	g.syncWriting = false

	delay := g.s.cfg.InitialRebalanceDelay
	initial := g.state == Empty && delay > 0
	g.newMemberAdded = false
	g.transition(PreparingRebalance, now)
	if initial {
		g.initialDelay = true
		if g.rb != nil {
			g.rb.initialDelay = true
		}
		g.initialStep = delay
		g.initialRemaining = max(g.maxRebalanceTimeout()-delay, 0)
		g.armJoin(now.Add(delay))
		return
	}
	g.initialDelay = false
	g.armJoin(now.Add(g.maxRebalanceTimeout()))
	g.tryCompleteJoin(now, out)
}

// tryCompleteJoin completes the join phase once every known member is parked
// and no KIP-394 member id is outstanding (never early during the initial
// delay).
func (g *Group) tryCompleteJoin(now time.Time, out *Output) {
	if g.state != PreparingRebalance || g.initialDelay {
		return
	}
	if g.awaiting == len(g.members) && len(g.pending) == 0 {
		g.completeJoin(now, out)
	}
}

func (g *Group) onJoinTimer(now time.Time, out *Output) {
	if g.state != PreparingRebalance {
		return
	}
	if g.initialDelay && g.newMemberAdded && g.initialRemaining > 0 {
		// KIP-134: a member arrived during the window; wait a little longer,
		// but never past the rebalance timeout.
		g.newMemberAdded = false
		step := min(g.s.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining = max(g.initialRemaining-g.initialStep, 0)
		g.initialStep = step
		g.armJoin(now.Add(step))
		return
	}
	g.completeJoin(now, out)
}

// completeJoin ends the join phase (docs/group-semantics.md §join.barrier).
func (g *Group) completeJoin(now time.Time, out *Output) {
	if g.state != PreparingRebalance {
		return
	}
	g.initialDelay = false
	// Dynamic members that did not rejoin are dropped; static members that did
	// not rejoin stay, with their old metadata, until their session expires.
	for i := 0; i < len(g.members); {
		m := g.members[i]
		if m.join == nil && m.instanceID == "" {
			g.note(causeOf(CauseRebalanceTimeout, now, m))
			g.rbEvict(m, "join", now)
			g.dropMember(m, out)
			continue
		}
		i++
	}
	if l := g.memberByID(g.leader); l == nil || l.join == nil {
		g.leader = ""
		for _, m := range g.members {
			if m.join != nil {
				g.leader = m.id
				break
			}
		}
		if g.leader == "" && len(g.members) > 0 {
			// Only absent static members remain: keep waiting for them;
			// their session timers will evict them if they never return.
			g.leader = g.members[0].id
			g.armJoin(now.Add(g.maxRebalanceTimeout()))
			return
		}
	}
	g.s.cancel(g.joinTimer)
	g.joinTimer = nil
	g.generation++
	g.pendingSync = nil
	if g.downgraded {
		g.downgraded = false
		for _, m := range g.members {
			m.downgradedFrom = 0
		}
	}

	if len(g.members) == 0 {
		g.protocol = ""
		g.leader = ""
		g.transition(Empty, now)
		g.updateSubscribed() // known and empty for a consumer group
		g.rbFinish(now, "empty", out)
		// Persist the empty generation; a failure is only logged (Kafka).
		g.persistMetadata(now, out, func(_ time.Time, code int16, _ *Output) {
			g.s.logWriteFailure(code, "group %q: persisting empty generation %d failed", g.id, g.generation)
		})
		return
	}

	g.protocol = g.selectProtocol()
	g.transition(CompletingRebalance, now)
	g.updateSubscribed()
	g.rbJoinDone(now)

	var leaderMembers []kmsg.JoinGroupResponseMember
	for _, m := range g.members {
		if m.join != nil {
			resp := g.joinResponse(m.join.v, m.id)
			if m.id == g.leader {
				if leaderMembers == nil {
					leaderMembers = g.memberList()
				}
				resp.Members = leaderMembers
			}
			out.reply(m.join.t, resp)
			m.join = nil
		}
		m.isNew = false
		g.s.arm(m.session, now.Add(m.sessionTimeout))
		mapPut(&g.pendingSync, m.id, struct{}{})
	}
	g.awaiting = 0
	gen := g.generation
	t := newTimer(nil)
	t.fire = func(now time.Time, out *Output) {
		if g.syncTimer == t {
			g.syncTimer = nil
		}
		g.onSyncTimeout(now, gen, out)
	}
	g.syncTimer = t
	g.s.arm(t, now.Add(g.maxRebalanceTimeout()))
}

// onSyncTimeout evicts members that never sent SyncGroup in generation gen
// (KAFKA-12890).
func (g *Group) onSyncTimeout(now time.Time, gen int32, out *Output) {
	if gen != g.generation || (g.state != CompletingRebalance && g.state != Stable) || len(g.pendingSync) == 0 {
		return
	}
	for _, m := range append([]*member(nil), g.members...) {
		if _, ok := g.pendingSync[m.id]; ok {
			kind := CauseSyncTimeout
			if m.id == g.leader {
				kind = CauseLeaderNotSynced
			}
			g.note(causeOf(kind, now, m))
			g.rbEvict(m, "sync", now)
			g.dropMember(m, out)
		}
	}
	g.pendingSync = nil
	g.prepareRebalance(now, out)
}

func (g *Group) onSessionExpired(now time.Time, m *member, out *Output) {
	if g.memberByID(m.id) != m {
		return
	}
	if !m.isNew && (m.join != nil || m.sync != nil) {
		// Parked members count as alive; join completion or the sync
		// timer re-arms or evicts them.
		return
	}
	c := causeOf(CauseSessionTimeout, now, m)
	timeout := m.sessionTimeout
	if m.isNew {
		timeout = g.s.cfg.NewMemberJoinTimeout
		c.Detail = "new member did not complete its join"
	}
	last := now.Add(-timeout)
	c.LastHeartbeat = &last
	g.note(c)
	if g.state == PreparingRebalance || g.state == CompletingRebalance {
		g.rbEvict(m, "session", now)
	}
	g.removeMember(now, m, out)
}

// joinResponse is a successful JoinGroup response for member id (members
// list left empty).
func (g *Group) joinResponse(v int16, id string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = v
	r.Generation = g.generation
	ptype, proto := g.protocolType, g.protocol
	r.ProtocolType = &ptype
	r.Protocol = &proto
	r.LeaderID = g.leader
	r.MemberID = id
	return r
}

func (g *Group) memberList() []kmsg.JoinGroupResponseMember {
	ms := make([]kmsg.JoinGroupResponseMember, 0, len(g.members))
	for _, m := range g.members {
		jm := kmsg.JoinGroupResponseMember{MemberID: m.id, ProtocolMetadata: m.metadataFor(g.protocol)}
		if m.instanceID != "" {
			inst := m.instanceID
			jm.InstanceID = &inst
		}
		ms = append(ms, jm)
	}
	return ms
}

// updateSubscribed recomputes the subscribed topics of a consumer group from
// the members' selected-protocol metadata (the ConsumerProtocol subscription
// starts with int16 version, then an array of topic names in every version).
func (g *Group) updateSubscribed() {
	g.subscribed = nil
	if g.protocolType != "consumer" {
		return
	}
	if len(g.members) == 0 {
		g.subscribed = []string{}
		return
	}
	seen := make(map[string]struct{})
	for _, m := range g.members {
		if !subscriptionTopics(m.metadataFor(g.protocol), seen) {
			return
		}
	}
	topics := make([]string, 0, len(seen))
	for t := range seen {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	g.subscribed = topics
}

// subscribes reports whether topic is among the subscribed topics (false
// when they are unknown).
func (g *Group) subscribes(topic string) bool {
	_, ok := slices.BinarySearch(g.subscribed, topic)
	return ok
}

// subscriptionTopics adds the topics of a ConsumerProtocol subscription to
// into, and reports whether it could read them. A negative version is not
// one: Kafka refuses to read such a subscription, so it leaves the group's
// subscription unknown (and every topic protected) as any unreadable one.
func subscriptionTopics(b []byte, into map[string]struct{}) bool {
	if len(b) < 6 || int16(binary.BigEndian.Uint16(b)) < 0 {
		return false
	}
	n := int32(binary.BigEndian.Uint32(b[2:]))
	b = b[6:]
	if n < 0 {
		return false
	}
	for ; n > 0; n-- {
		if len(b) < 2 {
			return false
		}
		l := int16(binary.BigEndian.Uint16(b))
		b = b[2:]
		if l < 0 || len(b) < int(l) {
			return false
		}
		into[string(b[:l])] = struct{}{}
		b = b[l:]
	}
	return true
}

func joinError(v int16, code int16, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = v
	r.ErrorCode = code
	r.Generation = -1
	r.MemberID = memberID
	if v < 7 {
		empty := ""
		r.Protocol = &empty
	}
	return r
}

func syncError(v int16, code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = v
	r.ErrorCode = code
	r.MemberAssignment = []byte{}
	return r
}

// armJoin arms the group's join timer, made when first needed. The group's
// rebalance timers exist only while a rebalance needs them (the join timer
// until the join completes, the sync timer until it fires or the next
// rebalance starts): an idle group keeps neither, and a loaded one never
// makes them (about 110 bytes and three allocations a group).
func (g *Group) armJoin(at time.Time) {
	if g.joinTimer == nil {
		g.joinTimer = newTimer(g.onJoinTimer)
	}
	g.s.arm(g.joinTimer, at)
}

package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
)

// Consumer-protocol group records (version 0). Keys (after the kind byte,
// uvarint-length-prefixed strings):
//
//	0x03 group metadata:        group            -> epoch int32, metadata hash uint64
//	0x05 member metadata:       group, member    -> instance, rack, client id, client host,
//	                                                rebalance timeout int32 ms, uvarint n + n topic
//	                                                names, regex, server assignor
//	0x06 target metadata:       group            -> assignment epoch int32
//	0x07 target of a member:    group, member    -> partitions
//	0x08 current assignment:    group, member    -> epoch int32, previous epoch int32, state int8,
//	                                                assigned partitions with epochs, pending ditto
//
// Partitions: uvarint topic count, then per topic its name, a uvarint count
// and the partitions (int32); "with epochs" adds an int32 epoch after each
// partition. Values start with a uint16 version, as the classic records do.
const (
	keyCGroup   byte = 0x03
	keyCMember  byte = 0x05
	keyCTMeta   byte = 0x06
	keyCTarget  byte = 0x07
	keyCCurrent byte = 0x08

	cValueVersion uint16 = 0
)

// cmeta is a member metadata record's value.
type cmeta struct {
	instanceID, rack, clientID, clientHost string
	rebalanceTimeout                       time.Duration
	names                                  []string
	regex, assignor                        string
	classic                                *classicMeta // nil for consumer-protocol members
	// principal is stored last and read only when present: a record written
	// before it existed reads as "" (no principal known yet).
	principal string
}

// ccurrent is a current-assignment record's value.
type ccurrent struct {
	epoch, prevEpoch int32
	state            memberState
	assigned         tpset
	pending          tpset
	assignedAt       map[topicPartition]int32
}

// crec carries the value of a consumer-group record (rec.c).
type crec struct {
	member      string
	epoch       int32  // keyCGroup
	hash        uint64 // keyCGroup
	assignEpoch int32  // keyCTMeta
	meta        *cmeta
	target      tpset
	cur         *ccurrent
}

func cKey(kind byte, group, member string) []byte {
	k := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(group)+len(member))
	k = append(k, kind)
	k = appendString(k, group)
	if kind == keyCMember || kind == keyCTarget || kind == keyCCurrent {
		k = appendString(k, member)
	}
	return k
}

func appendSet(b []byte, s tpset, at map[topicPartition]int32) []byte {
	ts := s.topics()
	size := binary.MaxVarintLen64
	for t, ps := range s {
		size += 2*binary.MaxVarintLen64 + len(t) + 8*len(ps)
	}
	b = slices.Grow(b, size)
	b = binary.AppendUvarint(b, uint64(len(ts)))
	for _, t := range ts {
		b = appendString(b, t)
		b = binary.AppendUvarint(b, uint64(len(s[t])))
		for _, p := range s[t] {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
			if at != nil {
				b = binary.BigEndian.AppendUint32(b, uint32(at[topicPartition{t, p}]))
			}
		}
	}
	return b
}

func (r *reader) set(at map[topicPartition]int32) tpset {
	n := r.uvarint()
	// A topic takes at least two bytes (an empty name, no partitions):
	// a damaged count must not size the map past what the value holds.
	if r.err || n > uint64(len(r.b))/2 {
		r.err = true
		return nil
	}
	s := make(tpset, n)
	for i := uint64(0); i < n && !r.err; i++ {
		t := r.string()
		np := r.uvarint()
		if r.err || np > uint64(len(r.b))/4 {
			r.err = true
			return nil
		}
		ps := make([]int32, 0, np)
		for j := uint64(0); j < np && !r.err; j++ {
			p := int32(r.u32())
			ps = append(ps, p)
			if at != nil {
				at[topicPartition{t, p}] = int32(r.u32())
			}
		}
		slices.Sort(ps)
		s[t] = slices.Compact(ps)
	}
	return s
}

// encodeConsumer returns the stored form of a consumer-group record.
func (r *rec) encodeConsumer() Record {
	key := cKey(r.kind, r.group, r.c.member)
	if r.del {
		return Record{Key: key}
	}
	v := binary.BigEndian.AppendUint16(nil, cValueVersion)
	c := r.c
	switch r.kind {
	case keyCGroup:
		v = binary.BigEndian.AppendUint32(v, uint32(c.epoch))
		v = binary.BigEndian.AppendUint64(v, c.hash)
	case keyCTMeta:
		v = binary.BigEndian.AppendUint32(v, uint32(c.assignEpoch))
	case keyCMember:
		m := c.meta
		v = appendString(v, m.instanceID)
		v = appendString(v, m.rack)
		v = appendString(v, m.clientID)
		v = appendString(v, m.clientHost)
		v = binary.BigEndian.AppendUint32(v, uint32(m.rebalanceTimeout.Milliseconds()))
		v = binary.AppendUvarint(v, uint64(len(m.names)))
		for _, n := range m.names {
			v = appendString(v, n)
		}
		v = appendString(v, m.regex)
		v = appendString(v, m.assignor)
		if m.classic == nil {
			v = binary.AppendUvarint(v, 0)
		} else {
			v = binary.AppendUvarint(v, uint64(len(m.classic.protocols))+1)
			v = binary.BigEndian.AppendUint32(v, uint32(m.classic.session.Milliseconds()))
			for _, p := range m.classic.protocols {
				v = appendString(v, p.Name)
				v = appendBytes(v, p.Metadata)
			}
		}
		v = appendString(v, m.principal)
	case keyCTarget:
		v = appendSet(v, c.target, nil)
	case keyCCurrent:
		cur := c.cur
		v = binary.BigEndian.AppendUint32(v, uint32(cur.epoch))
		v = binary.BigEndian.AppendUint32(v, uint32(cur.prevEpoch))
		v = append(v, byte(cur.state))
		v = appendSet(v, cur.assigned, cur.assignedAt)
		v = appendSet(v, cur.pending, cur.assignedAt)
	}
	return Record{Key: key, Value: v}
}

// decodeConsumer decodes a consumer-group record (key[0] is its kind).
func decodeConsumer(key, value []byte) (rec, error) {
	kr := reader{b: key[1:]}
	r := rec{kind: key[0], group: kr.string(), del: value == nil, c: &crec{}}
	if r.kind == keyCMember || r.kind == keyCTarget || r.kind == keyCCurrent {
		r.c.member = kr.string()
	}
	if kr.err {
		return rec{}, fmt.Errorf("%w: consumer group key %x", ErrCorruptRecord, key)
	}
	if r.del {
		return r, nil
	}
	vr := reader{b: value}
	_ = vr.u16()
	c := r.c
	switch r.kind {
	case keyCGroup:
		c.epoch = int32(vr.u32())
		c.hash = vr.u64()
	case keyCTMeta:
		c.assignEpoch = int32(vr.u32())
	case keyCMember:
		m := &cmeta{}
		m.instanceID = vr.string()
		m.rack = vr.string()
		m.clientID = vr.string()
		m.clientHost = vr.string()
		// Signed, as written: a negative timeout (the deadline already past) stays one.
		m.rebalanceTimeout = time.Duration(int32(vr.u32())) * time.Millisecond
		n := vr.uvarint()
		if n > uint64(len(vr.b)) {
			vr.err = true
		}
		for i := uint64(0); i < n && !vr.err; i++ {
			m.names = append(m.names, vr.string())
		}
		m.regex = vr.string()
		m.assignor = vr.string()
		if n := vr.uvarint(); n > 0 && !vr.err {
			if n-1 > uint64(len(vr.b)) {
				vr.err = true
				break
			}
			m.classic = &classicMeta{session: time.Duration(vr.u32()) * time.Millisecond}
			for i := uint64(0); i < n-1 && !vr.err; i++ {
				name := vr.string()
				meta := append([]byte(nil), vr.bytes()...)
				m.classic.protocols = append(m.classic.protocols, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: meta})
			}
		}
		if len(vr.b) > 0 && !vr.err {
			m.principal = vr.string()
		}
		c.meta = m
	case keyCTarget:
		c.target = vr.set(nil)
	case keyCCurrent:
		cur := &ccurrent{assignedAt: map[topicPartition]int32{}}
		cur.epoch = int32(vr.u32())
		cur.prevEpoch = int32(vr.u32())
		if len(vr.b) < 1 {
			vr.err = true
		} else {
			cur.state = memberState(int8(vr.b[0]))
			vr.b = vr.b[1:]
		}
		cur.assigned = vr.set(cur.assignedAt)
		cur.pending = vr.set(cur.assignedAt)
		c.cur = cur
	}
	if vr.err {
		return rec{}, fmt.Errorf("%w: consumer group %q record %#x", ErrCorruptRecord, r.group, r.kind)
	}
	return r, nil
}

// consumerGroupOf returns the group's consumer state, turning the group into
// a consumer group if it is not one (a classic group being replaced, or a
// new group).
func (s *Shard) consumerGroupOf(id string) (*Group, *consumerGroup) {
	g := s.groups[id]
	if g == nil {
		g = s.newGroup(id, time.Time{})
	}
	if g.cg == nil {
		g.cg = newConsumerGroup()
		g.cg.s, g.cg.id = s, id
		g.protocolType = "consumer"
	}
	return g, g.cg
}

// replayConsumer applies a consumer-group record (see replay).
func (s *Shard) replayConsumer(r *rec) {
	g := s.groups[r.group]
	if r.del && (g == nil || g.cg == nil) {
		return
	}
	var cg *consumerGroup
	if r.del {
		cg = g.cg
	} else {
		g, cg = s.consumerGroupOf(r.group)
	}
	c := r.c
	switch r.kind {
	case keyCGroup:
		if r.del {
			g.cg = nil
			if len(g.members) > 0 {
				return // turned classic (a downgrade): the classic state stays
			}
			g.protocolType = ""
			if len(g.offsets) == 0 && len(g.inflight) == 0 {
				delete(s.groups, r.group)
				s.groupGone(r.group)
			}
			return
		}
		cg.epoch, cg.hash = c.epoch, c.hash
	case keyCTMeta:
		if !r.del {
			cg.assignEpoch = c.assignEpoch
		}
	case keyCTarget:
		if r.del {
			delete(cg.target, c.member)
		} else {
			g.consumerMember(c.member)
			cg.target[c.member] = c.target
		}
	case keyCMember:
		if r.del {
			if m := cg.members[c.member]; m != nil {
				g.removeConsumerMember(m)
			}
			return
		}
		m := g.consumerMember(c.member)
		cg.indexMember(m, -1)
		if m.instanceID != "" && cg.static[m.instanceID] == m.id {
			delete(cg.static, m.instanceID)
		}
		meta := c.meta
		m.instanceID, m.rack, m.clientID, m.clientHost = meta.instanceID, meta.rack, meta.clientID, meta.clientHost
		m.rebalanceTimeout, m.names, m.regex, m.assignor = meta.rebalanceTimeout, meta.names, meta.regex, meta.assignor
		m.classic, m.principal = meta.classic, meta.principal
		cg.indexMember(m, +1)
		if m.instanceID != "" {
			cg.static[m.instanceID] = m.id
		}
	case keyCCurrent:
		m := cg.members[c.member]
		if m == nil {
			if r.del {
				return
			}
			m = g.consumerMember(c.member)
		}
		cg.release(m)
		if r.del {
			m.epoch, m.prevEpoch, m.state = epochLeave, epochLeave, mStable
			m.assigned, m.pending, m.assignedAt = tpset{}, tpset{}, map[topicPartition]int32{}
			return
		}
		cur := c.cur
		m.epoch, m.prevEpoch, m.state = cur.epoch, cur.prevEpoch, cur.state
		m.assigned, m.pending, m.assignedAt = cur.assigned, cur.pending, cur.assignedAt
		cg.hold(m)
	}
}

// consumerMember returns the member id of the group, creating it (at epoch
// 0, with nothing) if it does not exist: a member's records may load in any
// order.
func (g *Group) consumerMember(id string) *cmember {
	cg := g.cg
	if m := cg.members[id]; m != nil {
		return m
	}
	m := &cmember{id: id, assigned: tpset{}, pending: tpset{}, assignedAt: map[topicPartition]int32{}}
	m.session = newTimer(func(now time.Time, out *Output) { g.onConsumerSessionExpired(now, m, out) })
	m.rebalance = newTimer(func(now time.Time, out *Output) { g.onConsumerRebalanceExpired(now, m, out) })
	m.classicTimer = newTimer(func(now time.Time, out *Output) { g.onClassicTimer(now, m, out) })
	cg.members[id] = m
	cg.insertID(id)
	return m
}

// removeConsumerMember forgets m (its metadata record was tombstoned).
func (g *Group) removeConsumerMember(m *cmember) {
	cg := g.cg
	cg.release(m)
	cg.indexMember(m, -1)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
	g.s.cancel(m.session)
	g.s.cancel(m.rebalance)
	g.s.cancel(m.classicTimer)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	cg.removeID(m.id)
}

// Consumer-group records, as a handler emits them.

func cGroupRec(group string, epoch int32, hash uint64) rec {
	return rec{kind: keyCGroup, group: group, c: &crec{epoch: epoch, hash: hash}}
}

func cTMetaRec(group string, epoch int32) rec {
	return rec{kind: keyCTMeta, group: group, c: &crec{assignEpoch: epoch}}
}

func cTargetRec(group, member string, target tpset) rec {
	return rec{kind: keyCTarget, group: group, c: &crec{member: member, target: target}}
}

func cMemberRec(group string, m *cmember) rec {
	return rec{kind: keyCMember, group: group, c: &crec{member: m.id, meta: &cmeta{instanceID: m.instanceID, rack: m.rack,
		clientID: m.clientID, clientHost: m.clientHost, rebalanceTimeout: m.rebalanceTimeout,
		names: m.names, regex: m.regex, assignor: m.assignor, classic: m.classic, principal: m.principal}}}
}

// memberRecordBytes is the size (key and value) of the metadata record
// encodeConsumer writes for member m of group, counting idLen bytes for its
// id (a member id not generated yet: generatedIDLen).
func memberRecordBytes(group string, idLen int, m *cmember) int {
	str := func(n int) int { return uvarintLen(n) + n }
	n := 1 + str(len(group)) + str(idLen) // the key
	n += 2 + str(len(m.instanceID)) + str(len(m.rack)) + str(len(m.clientID)) + str(len(m.clientHost)) + 4
	n += uvarintLen(len(m.names))
	for _, name := range m.names {
		n += str(len(name))
	}
	n += str(len(m.regex)) + str(len(m.assignor))
	if m.classic == nil {
		n++
	} else {
		n += uvarintLen(len(m.classic.protocols)+1) + 4
		for _, p := range m.classic.protocols {
			n += str(len(p.Name)) + str(len(p.Metadata))
		}
	}
	return n + str(len(m.principal))
}

func uvarintLen(n int) int {
	k := 1
	for ; n >= 0x80; n >>= 7 {
		k++
	}
	return k
}

// generatedIDLen is the length of an id newMemberID(prefix) returns.
func generatedIDLen(prefix string) int { return min(len(prefix), maxMemberIDPrefix) + 37 }

// memberRecordRefusal is the message refusing a request that would make m's
// metadata record larger than the store takes (Config.MaxRecordBytes: etcd's
// request limit in cluster mode), "" if it fits. It is checked before any
// record of the request is emitted: a consumer group's records are applied
// before they are written, and a write the store refused left the shard
// ahead of the store, which only a reload of the whole partition repairs;
// the client's retries then reloaded it again and again. Kafka's answer to a
// write too large for its log is UNKNOWN_SERVER_ERROR, and its runtime drops
// the change.
func (s *Shard) memberRecordRefusal(now time.Time, group string, idLen int, m *cmember) string {
	if s.cfg.MaxRecordBytes <= 0 {
		return ""
	}
	return s.recordRefusal(now, group, "metadata", memberRecordBytes(group, idLen, m))
}

// recordRefusal is memberRecordRefusal's message for a member's record of n
// bytes (what it holds: "metadata", "assignment"), "" if it fits. A refusal
// is logged at most once a minute (logRefusal): a client retrying would log
// a line, which quotes a group id of up to 32 KB, at every request.
func (s *Shard) recordRefusal(now time.Time, group, what string, n int) string {
	most := s.cfg.MaxRecordBytes
	if most <= 0 || n <= most {
		return ""
	}
	s.logRefusal(now, "group %q: a member's %s record of %d bytes is larger than the store takes (%d); request refused", group, what, n, most)
	return "The member's " + what + " of " + strconv.Itoa(n) + " bytes is larger than the coordinator's store takes (" + strconv.Itoa(most) + " bytes)."
}

// logRefusal logs a request refused for a record over the store's limit, at
// most once a minute per shard; the next line logged counts those left out.
func (s *Shard) logRefusal(now time.Time, format string, args ...any) {
	s.refusalLog.logf(s, now, format, args...)
}

// minuteLog lets one line through a minute and counts the ones it holds
// back, for lines a client can repeat at every request.
type minuteLog struct {
	logged   time.Time
	unlogged int
}

// logf logs through s at most once a minute, adding how many lines were
// left out since the last one.
func (l *minuteLog) logf(s *Shard, now time.Time, format string, args ...any) {
	if now.Before(l.logged.Add(time.Minute)) {
		l.unlogged++
		return
	}
	s.logf(format+" (%d more refused since the last such line)", append(args, l.unlogged)...)
	l.logged, l.unlogged = now, 0
}

// currentRecordBytes is the size (key and value) of the current-assignment
// record of a member (id idLen bytes long) of group that holds assigned and
// has nothing pending.
func currentRecordBytes(group string, idLen int, assigned tpset) int {
	str := func(n int) int { return uvarintLen(n) + n }
	n := 1 + str(len(group)) + str(idLen) + 2 + 4 + 4 + 1 + uvarintLen(len(assigned))
	for t, ps := range assigned {
		n += str(len(t)) + uvarintLen(len(ps)) + 8*len(ps)
	}
	return n + uvarintLen(0) // pending
}

func cCurrentRec(group, member string, cur *ccurrent) rec {
	return rec{kind: keyCCurrent, group: group, c: &crec{member: member, cur: cur}}
}

func cTombstone(kind byte, group, member string) rec {
	return rec{kind: kind, group: group, del: true, c: &crec{member: member}}
}

// compileRegex compiles a subscription regex with Kafka's semantics: the
// whole topic name must match (Go's RE2 syntax, as Kafka's RE2/J). nil if it
// does not compile.
func compileRegex(expr string) *regexp.Regexp {
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil && strings.Contains(expr, `\Q`) {
		// A quotation left open runs to the end of the regex, as
		// Kafka's RE2/J reads it: here it would swallow the ")$" that
		// follows, so close it first. (expr parsed alone: nothing else
		// makes the wrapped form fail.)
		re, err = regexp.Compile("^(?:" + expr + `\E)$`)
	}
	if err != nil {
		return nil
	}
	return re
}

// regexMatch is a group's regex, parsed once, and the topics it matched at
// a version of the catalog.
type regexMatch struct {
	valid    bool           // expr parses (RE2 syntax, as Kafka's RE2/J)
	size     int            // size of its program (regexSize): matching cost per byte of name
	re       *regexp.Regexp // compiled on the shard only for a matching done there
	resolved bool
	version  uint64   // of the catalog, when resolved
	topics   []string // matching topic names at version, sorted
	inflight bool     // a RegexJob for it is out
	gen      uint64   // counts the resolutions: topics changed (allowedTopics)
}

// regexTopics returns the existing topics whose whole name matches expr,
// sorted; the caller must not modify the slice. For a regex some member uses
// (cg.regexes) the parsed regex and its matches are kept until the catalog
// changes: a regex costs its parsing once and its matching once per catalog
// version, not at every heartbeat that reconciles.
//
// Matching costs up to the regex program's size times the bytes of all topic
// names (Go's regexp is linear in both): a 32 KB regex over 1,000 topics can
// take seconds, which the partition's only goroutine must not spend. A
// matching estimated over syncRegexBudget is left to the runtime as a
// RegexJob (Shard.TakeRegexJobs), which compiles the regex too, as Kafka
// resolves regexes in the background; until its result arrives
// (Shard.RegexResolved) the regex gives the topics of its previous
// resolution, none before the first.
func (cg *consumerGroup) regexTopics(expr string, topics Topics) []string {
	e := cg.regexCache[expr]
	cached := e != nil
	if !cached {
		e = cg.s.newRegexMatch(expr)
		if cg.regexes[expr] > 0 { // dropped with the regex's last member (indexMember)
			if cg.regexCache == nil {
				cg.regexCache = map[string]*regexMatch{}
			}
			cg.regexCache[expr] = e
			cached = true
		}
	}
	if !e.valid {
		return nil
	}
	v := topics.Version()
	if e.resolved && e.version == v || e.inflight {
		return e.topics
	}
	// With no topic names, the compile is still the regex's size's work.
	if cg.s == nil || e.size*max(cg.s.nameBytes(topics, v), 1) <= syncRegexBudget {
		if e.re == nil {
			if e.re = compileRegex(expr); e.re == nil {
				e.valid = false
				return nil
			}
		}
		e.topics = matchTopics(e.re, topics, e.topics[:0])
		e.resolved, e.version = true, v
		e.gen++
		return e.topics
	}
	if cached {
		e.inflight = true
		cg.s.regexJobs = append(cg.s.regexJobs, RegexJob{Group: cg.id, Expr: expr, Version: v, re: e.re, size: e.size, topics: topics, match: e})
	}
	return e.topics
}

// regexUnresolved reports whether expr has given no topics yet because its
// first matching in this group is still out (a RegexJob): since the group
// was loaded, or since a member first used it. regexTopics starts the
// matching if it is needed.
func (cg *consumerGroup) regexUnresolved(expr string, topics Topics) bool {
	cg.regexTopics(expr, topics)
	e := cg.regexCache[expr]
	return e != nil && e.valid && !e.resolved
}

// holdsUnresolved reports whether a member holds partitions (assigned or
// pending revocation) while its regex is unresolved (regexUnresolved).
// Its topics are then unknown, not gone: a target computed now would leave
// them out and take every partition the regex gave away from its members,
// to give them back once the matching comes. That is what a group with a
// costly regex went through after each load (a restart, a cluster node
// taking the partition over): the matches are not stored, as Kafka stores
// them, and the first heartbeats came before the matching.
func (cg *consumerGroup) holdsUnresolved(topics Topics) bool {
	unresolved := false
	for expr := range cg.regexes {
		if cg.regexUnresolved(expr, topics) {
			unresolved = true // and the others' matchings started too
		}
	}
	if !unresolved {
		return false
	}
	for _, id := range cg.ids {
		if m := cg.members[id]; cg.memberUnresolved(m, topics) {
			return true
		}
	}
	return false
}

// memberUnresolved reports whether m holds partitions while its regex is
// unresolved (holdsUnresolved).
func (cg *consumerGroup) memberUnresolved(m *cmember, topics Topics) bool {
	return m.regex != "" && (len(m.assigned) > 0 || len(m.pending) > 0) && cg.regexUnresolved(m.regex, topics)
}

// syncRegexBudget bounds the matching a shard does itself, in regex program
// size times bytes of topic names (about 10 ns each at worst on the machine
// of docs/benchmarks.md: 40 ms). A simple regex over a few thousand topics is
// matched at once.
const syncRegexBudget = 4 << 20

// newRegexMatch parses expr, which validates it: the only work on a regex
// the partition's goroutine always does (Kafka compiles a new regex on its
// coordinator thread too), tens of milliseconds for a long one. The shard
// keeps the last one it parsed: a heartbeat validates its regex before its
// member uses it, and the member's first resolution reuses the parse. Each
// call returns a new regexMatch (a group's matches are its own).
func (s *Shard) newRegexMatch(expr string) *regexMatch {
	if s != nil && s.lastRegex != nil && s.lastRegexExpr == expr {
		return &regexMatch{valid: s.lastRegex.valid, size: s.lastRegex.size}
	}
	e := &regexMatch{}
	// The regex alone must parse: once wrapped to match whole names, a
	// fragment such as "f)|(x" would (Kafka refuses it). One whose repeats
	// would expand too far is refused before Simplify expands them
	// (regexTooLarge).
	if re, err := syntax.Parse(expr, syntax.Perl); err == nil && !regexTooLarge(re) {
		e.valid, e.size = true, regexSize(re.Simplify())+2 // and ^, $
	}
	if s != nil {
		s.lastRegex, s.lastRegexExpr = &regexMatch{valid: e.valid, size: e.size}, expr
	}
	return e
}

// regexProblem says why expr does not parse (Go's description; Kafka gives
// RE2/J's), for the INVALID_REGULAR_EXPRESSION message.
func regexProblem(expr string) string {
	re, err := syntax.Parse(expr, syntax.Perl)
	var se *syntax.Error
	switch {
	case errors.As(err, &se):
		return string(se.Code)
	case err != nil:
		return err.Error()
	case regexTooLarge(re):
		return "too large (its repeats expand to more than " + strconv.Itoa(maxRegexProgram) + " instructions)"
	}
	return "refused"
}

// maxRegexProgram bounds what a subscription regex's repeats add to its
// program once expanded (regexTooLarge): a topic pattern's repeats add a few
// hundred instructions at most, and Go's parser accepts repeats side by side
// ("a{1000}" 3,300 times, 23 KB) whose expansion took the partition's
// goroutine seconds and a gigabyte to compile, kept for as long as the
// member subscribes. A long regex without repeats (franz-go's alternation of
// thousands of patterns) costs in proportion to its text and is not bounded
// here.
const maxRegexProgram = 1 << 16

// regexTooLarge reports whether re's repeats, expanded, would add more than
// maxRegexProgram instructions to its program. It counts without expanding
// them (Simplify does, at the cost it would bound).
func regexTooLarge(re *syntax.Regexp) bool {
	base := regexInsts(re, false, math.MaxInt/2)
	return regexInsts(re, true, base+maxRegexProgram) > base+maxRegexProgram
}

// regexInsts estimates the instructions of re's program: one per node, one
// per rune of a literal, two per capture, and with expand a repeat's body
// once per repetition (a simplified regex has no repeats left). It stops
// counting past limit.
func regexInsts(re *syntax.Regexp, expand bool, limit int) int {
	n := 1
	switch re.Op {
	case syntax.OpLiteral:
		n = len(re.Rune)
	case syntax.OpCapture:
		n = 2
	}
	for _, sub := range re.Sub {
		if n += regexInsts(sub, expand, limit); n > limit {
			return limit + 1
		}
	}
	if expand && re.Op == syntax.OpRepeat {
		times := max(re.Min, re.Max, 1) // Max is -1 for "at least Min"
		if n > (limit+1)/times {
			return limit + 1
		}
		n *= times
	}
	return n
}

// regexSize estimates the size of the program re (simplified) compiles to
// (within 25% of regexp/syntax's count on the regexes of the tests).
func regexSize(re *syntax.Regexp) int { return regexInsts(re, false, math.MaxInt/2) }

// matchTopics appends to dst the names of the topics re matches, sorted.
func matchTopics(re *regexp.Regexp, topics Topics, dst []string) []string {
	topics.Range(func(t *catalog.Topic) bool {
		if re.MatchString(t.Name) {
			dst = append(dst, t.Name)
		}
		return true
	})
	slices.Sort(dst)
	return dst
}

// nameBytes is the bytes of all topic names (plus one each) at version v of
// topics, counted once per version.
func (s *Shard) nameBytes(topics Topics, v uint64) int {
	if !s.nameBytesSet || s.nameBytesVersion != v {
		n := 0
		topics.Range(func(t *catalog.Topic) bool { n += len(t.Name) + 1; return true })
		s.nameBytesN, s.nameBytesVersion, s.nameBytesSet = n, v, true
	}
	return s.nameBytesN
}

// RegexJob is the matching of one group's regex against the topics, too
// costly for the shard's goroutine (consumerGroup.regexTopics). The runtime
// runs it elsewhere (Resolve, or Step by Step) and hands the result back
// (Shard.RegexResolved).
type RegexJob struct {
	Group, Expr string
	Version     uint64 // of the topics, when the job was made
	re          *regexp.Regexp
	size        int // of the regex's program (regexMatch.size): the work per byte of name
	topics      Topics
	match       *regexMatch // the group's entry it resolves (RegexWanted)
	run         *regexRun   // where Step stands; nil before the first step
}

// RegexSliceBudget is the work a runtime lets a RegexJob do per Step, in the
// units of syncRegexBudget (regex program size times bytes of names
// matched): about 40 ms at worst, the most the shard spends on a matching
// itself. A job needing more takes several turns.
const RegexSliceBudget = syncRegexBudget

// regexRun is a RegexJob's progress between steps: the topics it matches
// (one version of them, taken at its first step), how far it went, and what
// matched so far.
type regexRun struct {
	re      *regexp.Regexp // nil: the regex does not compile (nothing matches)
	names   []*catalog.Topic
	version uint64
	next    int // index in names of the next topic to match
	matched []string
}

// sortedTopics is a Topics that can give its topics at one version without a
// copy (catalog.Catalog.Sorted).
type sortedTopics interface {
	Sorted() ([]*catalog.Topic, uint64)
}

// RegexResult is a RegexJob's outcome.
type RegexResult struct {
	Group, Expr string
	Version     uint64
	Topics      []string // matching names, sorted
}

// Resolve matches the regex against the topics at once. Safe to run on any
// goroutine: it reads only the job and the topics.
func (j RegexJob) Resolve() RegexResult {
	res, _ := j.Step(math.MaxInt)
	return res
}

// Started reports whether the job is part-way: a Step ran and more are
// needed.
func (j RegexJob) Started() bool { return j.run != nil }

// Step goes on with the matching for about budget units of work (the
// regex's program size times the bytes of each name matched, plus one, as
// the shard estimates it): topics are matched one after another until the
// work done reaches budget, at least one per step (one match cannot be cut
// short), and the first step compiles the regex too. done reports whether
// every topic was matched; res is the result then. A runtime can so share
// one place to run matchings among several jobs, each taking its turn, and
// drop a job between steps (Shard.RegexWanted).
//
// The first step takes the topics as they are then, at one version of the
// catalog, and the later ones go on with those whatever the catalog does
// meanwhile: the result is that version's (res.Version), and a change made
// since is matched again as any catalog change is (the regex's entry is then
// older than the catalog: consumerGroup.regexTopics). Starting again at each
// change instead would never end a long matching over a catalog that
// changes more often than the matching takes.
//
// Steps of one job must not run at the same time; any goroutine may run
// them, one after another.
func (j *RegexJob) Step(budget int) (res RegexResult, done bool) {
	r := j.run
	if r == nil {
		r = &regexRun{re: j.re}
		if r.re == nil {
			r.re = compileRegex(j.Expr)
		}
		if r.re != nil {
			if st, ok := j.topics.(sortedTopics); ok {
				r.names, r.version = st.Sorted()
			} else {
				// Read before the topics: the result is labelled
				// with a version no newer than what it saw, so a
				// change in between is matched again. The names
				// are copied: Range's topics are not to be kept.
				r.version = j.topics.Version()
				j.topics.Range(func(t *catalog.Topic) bool {
					r.names = append(r.names, &catalog.Topic{Name: t.Name})
					return true
				})
			}
		} else {
			r.version = j.Version
		}
		j.run = r
	}
	size := max(j.size, 1)
	for work := 0; r.next < len(r.names) && (work < budget || work == 0); r.next++ {
		name := r.names[r.next].Name
		if r.re.MatchString(name) {
			r.matched = append(r.matched, name)
		}
		work += size * (len(name) + 1)
	}
	if r.next < len(r.names) {
		return RegexResult{}, false
	}
	slices.Sort(r.matched) // in name order already, unless a Topics breaks its word
	j.run = nil
	return RegexResult{Group: j.Group, Expr: j.Expr, Version: r.version, Topics: r.matched}, true
}

// TakeRegexJobs returns the regex matchings the shard left to the runtime
// since the last call (see RegexJob); the runtime calls it after each turn.
func (s *Shard) TakeRegexJobs() []RegexJob {
	jobs := s.regexJobs
	s.regexJobs = nil
	return jobs
}

// RegexWanted reports whether j's result is still awaited: its group's
// members still use its regex, and nothing resolved it since. The runtime
// drops a job that is not before running it: a member that changes its
// regex at every heartbeat leaves a job behind each time, each one costly.
func (s *Shard) RegexWanted(j RegexJob) bool {
	g := s.groups[j.Group]
	return g != nil && g.cg != nil && j.match != nil && g.cg.regexCache[j.Expr] == j.match && j.match.inflight
}

// RegexResolved takes a RegexJob's result: the group's regex gives these
// topics from now on, and the group's next heartbeat sees its subscribed
// topics changed (a new group epoch and target if the metadata differs), as
// for a change of the catalog. A result for a regex or group that is gone is
// dropped.
func (s *Shard) RegexResolved(r RegexResult) {
	g := s.groups[r.Group]
	if g == nil || g.cg == nil {
		return
	}
	e := g.cg.regexCache[r.Expr]
	if e == nil || !e.inflight {
		return
	}
	e.inflight = false
	e.topics, e.resolved, e.version = r.Topics, true, r.Version
	e.gen++
	g.cg.subsDirty, g.cg.subsCacheDirty = true, true
}

// validRegex reports whether expr compiles, from the group's cache when a
// member already uses it.
func (s *Shard) validRegex(cg *consumerGroup, expr string) bool {
	if cg != nil {
		if e := cg.regexCache[expr]; e != nil {
			return e.valid
		}
	}
	return s.newRegexMatch(expr).valid
}

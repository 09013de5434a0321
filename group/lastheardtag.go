package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LastHeardTag is a tagged field cohort adds to each member of a
// DescribeGroups answer (flexible versions, v5+) and of a
// ConsumerGroupDescribe answer: how long ago the coordinator last heard from
// the member, and its session timeout. A member whose process hangs keeps
// its place in the group until its session runs out; with the tag an
// operator sees it going quiet long before that. Clients that do not know
// the tag skip it (franz-go keeps it in UnknownTags).
//
// Value: int64 milliseconds since the member was last heard from (by the
// coordinator's clock: its last Heartbeat, JoinGroup, SyncGroup or
// OffsetCommit that extended its session in a classic group, its last
// ConsumerGroupHeartbeat in a consumer group), int32 its session timeout in
// milliseconds, int8 flags: 1 = a JoinGroup or SyncGroup of the member is
// parked at the coordinator, so it counts as alive and its session does not
// run (the silence is then 0). A member in its first join phase is on the
// new-member join timeout, given as its session; that timeout runs even
// while its JoinGroup is parked.
//
// The silence is derived from the member's session deadline (the deadline
// minus the session timeout), which every message that keeps the member
// alive moves: the heartbeat path does no extra work for it. So the time
// left before eviction (session minus silence) is exact; right after a load
// (restart, failover) the silence counts from the load. A consumer member's
// deadline is measured against the session it was armed with
// (cmember.sessionSpan), given as its session: after the group's session
// timeout changed (consumer.session.timeout.ms) it keeps the old deadline,
// and the old session, until its next heartbeat, whose deadline the new
// timeout sets; its silence is right meanwhile.
const LastHeardTag = 10007

// LastHeard is the value of LastHeardTag.
type LastHeard struct {
	Silent  time.Duration // since the member was last heard from
	Session time.Duration // its session timeout
	Parked  bool          // a JoinGroup/SyncGroup of it is parked: its session does not run
}

// EvictIn is how long until the session timeout evicts the member (0 when
// it is due; Parked: not counting).
func (l LastHeard) EvictIn() time.Duration { return max(0, l.Session-l.Silent) }

func appendLastHeard(l LastHeard) []byte {
	b := kbin.AppendInt64(nil, l.Silent.Milliseconds())
	b = kbin.AppendInt32(b, int32(min(l.Session.Milliseconds(), 1<<31-1)))
	var flags int8
	if l.Parked {
		flags = 1
	}
	return kbin.AppendInt8(b, flags)
}

func readLastHeard(tags kmsg.Tags) (l LastHeard, ok bool) {
	tags.Each(func(key uint32, val []byte) {
		if key != LastHeardTag {
			return
		}
		r := kbin.Reader{Src: val}
		silent, session, flags := r.Int64(), r.Int32(), r.Int8()
		if r.Complete() != nil || len(r.Src) != 0 || silent < 0 || session < 0 {
			return
		}
		l, ok = LastHeard{Silent: time.Duration(silent) * time.Millisecond,
			Session: time.Duration(session) * time.Millisecond, Parked: flags&1 != 0}, true
	})
	return l, ok
}

// LastHeardOf reads m's LastHeardTag; ok is false when m has none (a server
// that is not cohort or older than the tag, a version before v5) or it does
// not decode.
func LastHeardOf(m *kmsg.DescribeGroupsResponseGroupMember) (LastHeard, bool) {
	return readLastHeard(m.UnknownTags)
}

// ConsumerLastHeardOf reads m's LastHeardTag, as LastHeardOf.
func ConsumerLastHeardOf(m *kmsg.ConsumerGroupDescribeResponseGroupMember) (LastHeard, bool) {
	return readLastHeard(m.UnknownTags)
}

// armSession arms consumer member m's session timer to expire session
// after now, and notes that span (cmember.sessionSpan).
func (s *Shard) armSession(m *cmember, now time.Time, session time.Duration) {
	m.sessionSpan = session
	s.arm(m.session, now.Add(session))
}

// silence is how long ago a member whose session timer t runs for session
// was last heard from at now: the timer is armed at "last heard + session".
// ok is false when the timer is not armed.
func silence(t *timer, session time.Duration, now time.Time) (time.Duration, bool) {
	if !t.armed() {
		return 0, false
	}
	return max(0, session-t.at.Sub(now)), true
}

// lastHeard is m's LastHeardTag value at now.
func (g *Group) lastHeard(m *member, now time.Time) (LastHeard, bool) {
	session := m.sessionTimeout
	if m.isNew {
		session = g.s.cfg.NewMemberJoinTimeout
	}
	if m.join != nil || m.sync != nil {
		// Waiting for the coordinator's answer: heard. A member in its
		// first join phase still has the new-member join timeout
		// running, but it is the group it waits for, not the member
		// that went quiet.
		return LastHeard{Session: session, Parked: true}, true
	}
	silent, ok := silence(m.session, session, now)
	return LastHeard{Silent: silent, Session: session}, ok
}

// consumerLastHeard is a consumer-protocol group member's LastHeardTag
// value at now.
func (g *Group) consumerLastHeard(m *cmember, now time.Time) (LastHeard, bool) {
	// The session its deadline was set with: after the group's session
	// timeout changed, the member keeps that deadline until its next
	// heartbeat, and measured from the new one its silence was off by
	// the change.
	session := m.sessionSpan
	if session <= 0 {
		session = g.sessionTimeout(m)
	}
	silent, ok := silence(m.session, session, now)
	return LastHeard{Silent: silent, Session: session}, ok
}

// QuietShare is the share of its session a member must have been silent
// for to be called quiet (LastHeard.Quiet): half. Stock clients heartbeat
// several times per session (Kafka's defaults: every 3 s of a 45 s classic
// session, every 5 s of a 45 s consumer-protocol session), so a member
// silent for half its session has missed several heartbeats in a row.
const QuietShare = 0.5

// Quiet reports whether the member has been silent for more than
// QuietShare of its session (never while Parked).
func (l LastHeard) Quiet() bool {
	return !l.Parked && l.Session > 0 && float64(l.Silent) > QuietShare*float64(l.Session)
}

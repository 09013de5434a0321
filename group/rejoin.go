package group

import (
	"slices"
	"time"
)

// Linking a rejoin to the eviction it follows. A member evicted for a
// timeout (its session, its rebalance timeout, a sync timeout) is often the
// same process coming back moments later with a new member id: it was
// stopped, paused or cut off, not gone. The group remembers its recent
// evictions in memory; after a load (a restart, the partition moving to
// another node) they are rebuilt from the stored history, whose events
// name each eviction and each join already linked (restoreEvictions).
// A member that joins with the same instance id (a
// static member), or with neither an instance id nor a different client id
// and host (a dynamic one, whose client id is not empty), within
// RejoinWindow of the eviction gets a Rejoin on its member_joined cause.
// Each eviction links at most one join: two processes of the same client
// on one host that come back are linked one each, the latest eviction
// first.

// RejoinWindow is how long after an eviction a join can be linked to it.
// A process that comes back later is more likely a restart than the same
// process resuming; Kafka clients retry within seconds of learning they
// were evicted.
const RejoinWindow = 5 * time.Minute

// rejoinLogMax bounds the evictions a group remembers (the oldest go
// first): a group whose members are evicted by the hundred links the last
// ones.
const rejoinLogMax = 32

// Rejoin links a member_joined cause to the eviction of the member it
// likely replaces (Cause.Rejoin).
type Rejoin struct {
	// MemberID is the evicted member's id; Kind why it was evicted
	// (session_timeout, rebalance_timeout, sync_timeout,
	// leader_not_synced), At when.
	MemberID string    `json:"member_id"`
	Kind     CauseKind `json:"kind"`
	At       time.Time `json:"at"`
	// AfterMs is the time from the eviction to this join, never below
	// zero: after a move in cluster mode the eviction was timed by the old
	// owner's clock and the join by the new owner's, and a clock behind
	// the other would make it negative; it is then 0.
	AfterMs int64 `json:"after_ms"`
	// By is what matched: "instance_id" (a static member) or "client"
	// (client id and client host).
	By string `json:"by"`
}

// eviction is one member a timeout removed from the group.
type eviction struct {
	memberID, instanceID, clientID, clientHost string
	kind                                       CauseKind
	at                                         time.Time
}

// evicting reports whether a cause of kind removes its member for a timeout.
func evicting(kind CauseKind) bool {
	switch kind {
	case CauseSessionTimeout, CauseRebalanceTimeout, CauseSyncTimeout, CauseLeaderNotSynced:
		return true
	}
	return false
}

// linkRejoin remembers c's member if c evicts it, and links c to a
// remembered eviction if c is a member joining that matches one.
func (g *Group) linkRejoin(c *Cause) {
	g.restoreEvictions(c.At)
	var es []eviction
	if g.evictions != nil {
		es = pruneEvictions(*g.evictions, c.At)
	}
	switch {
	case evicting(c.Kind) && c.MemberID != "":
		if len(es) == rejoinLogMax {
			es = es[1:]
		}
		es = append(es, eviction{memberID: c.MemberID, instanceID: c.InstanceID, clientID: c.ClientID,
			clientHost: c.ClientHost, kind: c.Kind, at: c.At})
	case c.Kind == CauseMemberJoined:
		for i := len(es) - 1; i >= 0; i-- {
			if by := rejoinBy(es[i], c); by != "" {
				e := es[i]
				c.Rejoin = &Rejoin{MemberID: e.memberID, Kind: e.kind, At: e.at, AfterMs: max(c.At.Sub(e.at).Milliseconds(), 0), By: by}
				es = append(es[:i], es[i+1:]...)
				break
			}
		}
	}
	if len(es) == 0 {
		g.evictions = nil
		return
	}
	g.evictions = &es
}

// rejoinBy is how the joining member of c matches the eviction e: by
// "instance_id", by "client" (id and host, neither member static), or ""
// when it does not.
func rejoinBy(e eviction, c *Cause) string {
	switch {
	case e.memberID == c.MemberID:
		return ""
	case c.InstanceID != "":
		if e.instanceID == c.InstanceID {
			return "instance_id"
		}
	case e.instanceID == "" && c.ClientID != "" && e.clientID == c.ClientID && e.clientHost == c.ClientHost:
		return "client"
	}
	return ""
}

// pruneEvictions drops from es the evictions older than RejoinWindow at now.
func pruneEvictions(es []eviction, now time.Time) []eviction {
	n := 0
	for n < len(es) && now.Sub(es[n].at) > RejoinWindow {
		n++
	}
	return es[n:]
}

// restoreEvictions rebuilds, once after a load, the evictions the group
// remembered from its stored events: each evicting cause (the cause or a
// more cause of an event) is an eviction, and each join linked to one
// (Cause.Rejoin) consumed it, as linkRejoin did when they happened. The
// events are decoded then, at the group's first trigger after the load,
// which records an event (and so decodes them) soon anyway. Before, the
// evictions were kept in memory only, and a process evicted before a
// restart or a failover that came back after it was not linked. Not
// rebuilt: causes that were never stored (the rebalance in progress at
// the unload, more causes past the 64 kept, a cause cut to its kind by the
// stored bound, which names no member).
func (g *Group) restoreEvictions(now time.Time) {
	h := g.s.hist[g.id]
	if h == nil || !h.evictionsStored {
		return
	}
	h.evictionsStored = false
	var es []eviction
	replay := func(c *Cause) {
		switch {
		case evicting(c.Kind) && c.MemberID != "":
			es = append(es, eviction{memberID: c.MemberID, instanceID: c.InstanceID, clientID: c.ClientID,
				clientHost: c.ClientHost, kind: c.Kind, at: c.At})
		case c.Rejoin != nil:
			es = slices.DeleteFunc(es, func(e eviction) bool {
				return e.memberID == c.Rejoin.MemberID && e.at.Equal(c.Rejoin.At)
			})
		}
	}
	for _, ev := range g.s.all(g.id, h) {
		if now.Sub(ev.End) > RejoinWindow {
			continue // its causes are older still
		}
		replay(&ev.Cause)
		for i := range ev.MoreCauses {
			replay(&ev.MoreCauses[i])
		}
	}
	slices.SortStableFunc(es, func(a, b eviction) int { return a.at.Compare(b.at) })
	if g.evictions != nil {
		es = append(es, *g.evictions...)
	}
	es = pruneEvictions(es, now)
	if len(es) > rejoinLogMax {
		es = es[len(es)-rejoinLogMax:]
	}
	if len(es) == 0 {
		g.evictions = nil
		return
	}
	g.evictions = &es
}

package console

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
)

// Event is one rebalance on a group page's timeline.
type Event struct {
	Seq  uint64
	Time time.Time
	// Consumer is set for an event of a consumer-protocol (KIP-848)
	// group: Generation is then the group epoch, Join the time until the
	// target assignment was computed and Sync the time the members then
	// took to reach it (docs/history.md), and the page says so.
	Consumer   bool
	Generation int32
	Outcome    string
	Cause      string // what started it, in a few words
	Kind       string // the cause's kind as the history names it
	Detail     string // who and why
	More       []string
	Duration   time.Duration
	Join, Sync time.Duration
	// Earlier (consumer) is the part of Join during which earlier targets
	// were in force, the members reconciling to them, before bumps the
	// event took in replaced them: not time spent computing a target.
	Earlier time.Duration
	Waited  []string // members waited for, slowest first
	Evicted []string
	Moves   []Move
	// How many causes, members waited for, evicted members and moves
	// are not listed (each list shows at most maxListed).
	MoreOmitted, WaitedOmitted, EvictedOmitted, MovesOmitted int
}

// maxListed is the most entries a group page lists in each list of an
// event (more causes, members waited for, evicted, moves) and of the
// rebalance in progress (members waited for). The node is asked for no
// more (group.HistoryListsTag); a node that returns more is cut here.
// Unbounded, a group of 2,000 members had a timeline of 4 MB: every event
// listed hundreds of joins and moves.
var maxListed = 25 // a variable for tests

// capList keeps the first maxListed entries of *l and returns how many
// it left out, plus omitted (those the node already left out).
func capList[T any](l *[]T, omitted int) int {
	if len(*l) > maxListed {
		omitted += len(*l) - maxListed
		*l = (*l)[:maxListed]
	}
	return omitted
}

// Move is what a rebalance changed for one member.
type Move struct {
	Member         string
	Added, Removed []TopicParts
	Changed        bool // other protocol types: the assignment bytes changed
	Bytes          int
	New            bool
}

// History is what a DescribeGroups answer says of a group's past
// rebalances, its storm flag and what a rebalance in progress waits for.
type History struct {
	Events  []Event // newest first
	Storm   bool
	StormOf string // "12 rebalances in 5m0s (session timeout 8, ...)"
	Waiting []string
	// Away lists the static members of a consumer group away for a
	// restart (epoch -2): they keep their partitions for their instance
	// ids, and while only they keep the group from Stable no rebalance is
	// in progress (InProgress is false).
	Away []string
	// InProgress is set while a rebalance is in progress: what started
	// it (cause in words, who) and when.
	InProgress       bool
	InProgressCause  string
	InProgressDetail string
	InProgressSince  time.Time
	WaitingOmitted   int    // members waited for that are not listed
	Note             string // why there is no timeline
	// Older counts the events older than those shown (the group page
	// shows the newest ?events=N, eventsShown by default); ShowMore is
	// the ?events= that shows eventsShown more.
	Older, ShowMore int
}

// causeWords are the cause kinds as a person reads them.
var causeWords = map[group.CauseKind]string{
	group.CauseMemberJoined:        "member joined",
	group.CauseMetadataChanged:     "metadata changed",
	group.CauseSubscriptionChanged: "subscription changed",
	group.CauseMemberLeft:          "member left",
	group.CauseSessionTimeout:      "session timeout",
	group.CauseRebalanceTimeout:    "rebalance timeout",
	group.CauseSyncTimeout:         "sync timeout",
	group.CauseLeaderNotSynced:     "leader never synced",
	group.CauseStaticReplaced:      "static member replaced",
	group.CauseAdmin:               "admin action",
	group.CauseLoaded:              "group loaded",
	group.CauseTopicsChanged:       "topics changed",
	group.CauseOther:               "other",
}

func causeWord(k group.CauseKind) string {
	if w, ok := causeWords[k]; ok {
		return w
	}
	return strings.ReplaceAll(string(k), "_", " ")
}

// clientHost is a member's host as the page shows it: the address alone.
// A node reports a consumer-protocol member's host as Kafka does, in the
// form of Java's InetAddress text ("/127.0.0.1"); the CLI drops the slash
// too, so both show the same.
func clientHost(h string) string { return strings.TrimPrefix(h, "/") }

// who names a member: client id, host, instance id, member id.
func who(memberID, instanceID, clientID, host string) string {
	var parts []string
	if clientID != "" {
		parts = append(parts, clientID)
	}
	if host = clientHost(host); host != "" {
		parts = append(parts, "on "+host)
	}
	if instanceID != "" {
		parts = append(parts, "instance "+instanceID)
	}
	if memberID != "" {
		parts = append(parts, "("+memberID+")")
	}
	return strings.Join(parts, " ")
}

func causeDetail(c group.Cause) string {
	var parts []string
	if w := who(c.MemberID, c.InstanceID, c.ClientID, c.ClientHost); w != "" {
		parts = append(parts, w)
	}
	if c.Reason != "" {
		parts = append(parts, "reason: "+c.Reason)
	}
	if c.LastHeartbeat != nil {
		parts = append(parts, "last heartbeat "+c.LastHeartbeat.UTC().Format("15:04:05.000")+" UTC")
	}
	if len(c.Topics) > 0 {
		parts = append(parts, "topics "+strings.Join(c.Topics, ", "))
	}
	if c.Detail != "" {
		parts = append(parts, c.Detail)
	}
	if r := c.Rejoin; r != nil {
		parts = append(parts, fmt.Sprintf("rejoined after the eviction of %s (%s) %s earlier", r.MemberID, causeWord(r.Kind),
			ms(r.AfterMs).Round(100*time.Millisecond)))
	}
	return strings.Join(parts, "; ")
}

func topicParts(tps []group.TopicPartitions) []TopicParts {
	out := make([]TopicParts, 0, len(tps))
	for _, tp := range tps {
		out = append(out, TopicParts{Topic: tp.Topic, Partitions: sorted(tp.Partitions)})
	}
	return out
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// historyOf reads the history from a DescribeGroups answer.
// causeList is "member joined 5, session timeout 2": each cause in words
// with its count, sorted.
func causeList(cs map[group.CauseKind]int) string {
	var l []string
	for k, n := range cs {
		l = append(l, fmt.Sprintf("%s %d", causeWord(k), n))
	}
	slices.Sort(l)
	return strings.Join(l, ", ")
}

func historyOf(d *kmsg.DescribeGroupsResponseGroup) History {
	doc, ok := group.HistoryTagOf(d)
	if !ok {
		return History{Note: "This node recorded no rebalance history for this group (a node without history, or an older version)."}
	}
	if doc.Withheld {
		return History{Note: "The rebalance history is withheld: it names topics you may not describe."}
	}
	h := History{Storm: doc.Storm.Flagged}
	if doc.Storm.Flagged {
		by := doc.Storm.StartedBy // what started them; from an older node, every cause
		if len(by) == 0 {
			by = doc.Storm.Causes
		}
		h.StormOf = fmt.Sprintf("%d rebalances within %v (more than %d): %s", doc.Storm.Count, ms(doc.Storm.WindowMs), doc.Storm.Threshold, causeList(by))
		if !maps.Equal(by, doc.Storm.Causes) && len(doc.Storm.Causes) > 0 {
			// Causes that came during the rebalances (evictions for a
			// timeout among them) started none: name them too, as
			// `cohort group why` and the node's log do.
			h.StormOf += "; all causes, with the rejoins during them: " + causeList(doc.Storm.Causes)
		}
	}
	if w := doc.Waiting; w != nil {
		h.InProgress, h.InProgressSince = true, w.Since
		if w.Cause != nil {
			h.InProgressCause, h.InProgressDetail = causeWord(w.Cause.Kind), causeDetail(*w.Cause)
		}
		for _, m := range w.Members {
			if m.Phase == "away" {
				line := who(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost) + " left for a restart"
				if !m.Since.IsZero() {
					line += " at " + m.Since.UTC().Format("15:04:05")
				}
				line += " and keeps its partitions"
				if m.Deadline != nil {
					line += "; they go to the others at " + m.Deadline.UTC().Format("15:04:05") + " unless its instance id joins before"
				}
				h.Away = append(h.Away, line)
				continue
			}
			line := fmt.Sprintf("%s has not completed %s since %s", who(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost), m.Phase, m.Since.UTC().Format("15:04:05"))
			if m.Deadline != nil {
				line += "; evicted at " + m.Deadline.UTC().Format("15:04:05") + " if it does not"
			}
			h.Waiting = append(h.Waiting, line)
		}
		h.WaitingOmitted = capList(&h.Waiting, w.OmittedMembers)
		capList(&h.Away, 0)
		if w.OnlyAway || len(h.Away) > 0 && len(h.Waiting) == 0 && h.WaitingOmitted == 0 {
			// Only static members away: no rebalance. The node says so
			// (OnlyAway) even when the groups page asked for no members;
			// from a node without the flag, the members listed tell.
			h.InProgress = false
		}
	}
	for i := len(doc.History) - 1; i >= 0; i-- {
		e := doc.History[i]
		ev := Event{Seq: e.Seq, Time: e.Start, Consumer: e.Type == "consumer", Generation: e.Generation, Outcome: e.Outcome,
			Cause: causeWord(e.Cause.Kind), Kind: string(e.Cause.Kind), Detail: causeDetail(e.Cause),
			Duration: ms(e.DurationMs), Join: ms(e.JoinMs), Sync: ms(e.SyncMs), Earlier: ms(e.EarlierTargetMs), Evicted: e.Evicted}
		for _, c := range e.MoreCauses {
			ev.More = append(ev.More, causeWord(c.Kind)+": "+causeDetail(c))
		}
		for _, w := range e.WaitedFor {
			if w.WaitedMs == 0 && !w.Evicted {
				continue // came at once: not worth a mention
			}
			s := fmt.Sprintf("%s (%s, %v)", w.MemberID, w.Phase, ms(w.WaitedMs))
			if w.InstanceID != "" {
				s = w.InstanceID + " " + s
			}
			if w.Evicted {
				s += " evicted"
			}
			ev.Waited = append(ev.Waited, s)
		}
		for _, m := range e.Members {
			if m.Decoded && len(m.Added) == 0 && len(m.Removed) == 0 && !m.New {
				continue
			}
			if !m.Decoded && !m.Changed && !m.New {
				continue
			}
			name := m.MemberID
			if m.ClientID != "" {
				name = m.ClientID + " " + m.MemberID
			}
			ev.Moves = append(ev.Moves, Move{Member: name, Added: topicParts(m.Added), Removed: topicParts(m.Removed),
				Changed: !m.Decoded && m.Changed, Bytes: m.AssignmentBytes, New: m.New})
		}
		var o group.Omitted
		if e.Omitted != nil {
			o = *e.Omitted
		}
		ev.MoreOmitted = capList(&ev.More, o.MoreCauses)
		ev.WaitedOmitted = capList(&ev.Waited, o.WaitedFor)
		ev.EvictedOmitted = capList(&ev.Evicted, o.Evicted)
		ev.MovesOmitted = capList(&ev.Moves, o.Members)
		h.Events = append(h.Events, ev)
	}
	switch {
	case doc.HistoryOff && len(h.Events) == 0:
		h.Note = "This node keeps no rebalance history (cohort serve --group-history 0): no rebalance is recorded."
	case doc.HistoryOff:
		h.Note = "This node keeps no rebalance history (cohort serve --group-history 0): the rebalances below were recorded before; none since is recorded."
	case len(h.Events) == 0:
		h.Note = "No rebalance recorded yet."
	}
	return h
}

// summarize fills the groups-page columns that come from the history:
// the last rebalance and how many started within the last hour, the one in
// progress included (the history records a rebalance when it completes).
func summarize(r *GroupRow, h History, now time.Time) {
	r.Storm = h.Storm
	starts := make([]time.Time, 0, len(h.Events)+1)
	for _, e := range h.Events {
		starts = append(starts, e.Time)
	}
	if h.InProgress && !h.InProgressSince.IsZero() {
		starts = append(starts, h.InProgressSince)
	}
	if len(starts) == 0 {
		return
	}
	r.HasHistory = true
	n := 0
	for _, at := range starts {
		if at.After(r.LastRebalance) {
			r.LastRebalance = at
		}
		if now.Sub(at) <= time.Hour {
			n++
		}
	}
	r.RebalancesPerHour = float64(n)
}

// eventsShown is how many of the newest events a group page shows by
// default; ?events=N shows N (older ones are counted, with a link to show
// more).
var eventsShown = 20 // a variable for tests

// showEvents keeps the newest n events of h for the page (n < 1:
// eventsShown) and counts the older ones.
func (h *History) showEvents(n int) {
	if n < 1 {
		n = eventsShown
	}
	if len(h.Events) > n {
		h.Older = len(h.Events) - n
		h.Events = h.Events[:n]
		h.ShowMore = n + eventsShown
	}
}

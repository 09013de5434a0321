package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/grouphistory"
	"github.com/cohort-dev/cohort/internal/shellarg"
)

// "cohort group history ID" and "cohort group why ID": the rebalance history
// cohort records for a group (package group, docs/history.md), as a table,
// as JSON (the HistoryDoc itself) or as plain sentences. Both ask the
// group's coordinator with DescribeGroups and the history tag (package
// grouphistory), which classic and consumer-protocol groups answer alike.

// whyDefaultLast is how many rebalances "group why" explains by default.
const whyDefaultLast = 3

// historyFlags are the flags of "group history" and "group why".
type historyFlags struct {
	last    int
	lastSet bool // --last was given
}

// historyOf reads the history of id from its coordinator's DescribeGroups
// answer. A group that does not exist is an error (with the server's
// message); so is a server that sends no history (not cohort, or a cohort
// without it). A consumer-protocol group answers DescribeGroups as missing
// but still carries its history, which is used.
//
// A coordinator that cannot be reached, or that answers that it does not
// serve the group right now (a partition that moves), is asked again until
// ctx ends (untilReachable), as group describe does.
func historyOf(ctx context.Context, cl *kgo.Client, id string, n int32) (*group.HistoryDoc, string, error) {
	type answer struct {
		doc    *group.HistoryDoc
		leader string
	}
	a, err := untilReachable(ctx, cl, func() (answer, error) {
		doc, leader, err := historyOnce(ctx, cl, id, n)
		return answer{doc, leader}, err
	})
	return a.doc, a.leader, err
}

func historyOnce(ctx context.Context, cl *kgo.Client, id string, n int32) (*group.HistoryDoc, string, error) {
	ds, err := grouphistory.Describe(ctx, cl, []string{id}, n)
	if err != nil {
		return nil, "", fmt.Errorf("history of %s: %w", id, err)
	}
	for i := range ds {
		d := &ds[i]
		if d.Group != id {
			continue
		}
		if doc, ok := group.HistoryTagOf(d); ok {
			if doc.Withheld {
				return nil, "", fmt.Errorf("history of %s: withheld: it names topics you may not describe (TOPIC DESCRIBE)", id)
			}
			_, leader, _ := group.DescribeTagOf(d)
			return doc, leader, nil
		}
		if err := kerr.ErrorForCode(d.ErrorCode); err != nil {
			return nil, "", fmt.Errorf("history of %s: %w", id, withMessage(err, deref(d.ErrorMessage)))
		}
		if d.State == "Dead" {
			return nil, "", fmt.Errorf("history of %s: %w", id, errNoGroup)
		}
		return nil, "", fmt.Errorf("history of %s: the server sent no rebalance history (it is not cohort, or a version without history)", id)
	}
	return nil, "", fmt.Errorf("history of %s: no answer for the group", id)
}

// historyCmd runs "group history ID" (why false) or "group why ID".
func historyCmd(e env, f *cmdFlags, hf historyFlags, why bool, ids []string) error {
	name := "group history"
	if why {
		name = "group why"
	}
	if len(ids) != 1 {
		return usagef("%s: want exactly one group id, got %d", name, len(ids))
	}
	if hf.last < 0 {
		return usagef("%s: --last %d: want 0 or more", name, hf.last)
	}
	if why && f.o.json() {
		return usagef("group why prints sentences only: use group history --output json for the data")
	}
	n := int32(-1) // every event kept
	switch {
	case hf.lastSet:
		n = int32(min(hf.last, 1<<30))
	case why:
		n = whyDefaultLast
	}
	cl, ctx, done, err := f.c.open()
	if err != nil {
		return err
	}
	defer done()
	doc, leader, err := historyOf(ctx, cl, ids[0], n)
	if err != nil {
		return err
	}
	if why {
		var hb *heartbeatInterval
		if waitsForHeartbeats(doc) {
			hb = groupHeartbeatInterval(ctx, cl, doc.Group)
		}
		writeWhyQuiet(e.stdout, doc, leader, hb, e.clock.Now(), n == 0, quietOf(ctx, cl, doc.Group))
		return nil
	}
	if f.o.json() {
		return writeJSON(e.stdout, doc)
	}
	return writeHistoryTable(e.stdout, doc)
}

// writeHistoryTable prints one row per rebalance, oldest first, then the
// storm line and, during a rebalance, a pointer to "group why".
func writeHistoryTable(w io.Writer, doc *group.HistoryDoc) error {
	tw := newTable(w)
	// A group that moved between the protocols keeps the events of
	// both: its numbers are then generations in some rows and group
	// epochs in others, and each row says which.
	types := map[string]bool{}
	for _, ev := range doc.History {
		types[eventType(doc, ev)] = true
	}
	mixed := len(types) > 1
	gen := "GENERATIONS"
	switch {
	case mixed:
		gen = "GENERATIONS/EPOCHS"
	case doc.Type == "consumer":
		gen = "EPOCHS"
	}
	fmt.Fprintf(tw, "SEQ\tSTART\t%s\tOUTCOME\tCAUSE\tMEMBER\tCLIENT\tJOIN\tSYNC\tWAITED-FOR\tEVICTED\tMOVED\tREJOIN-OF\n", gen)
	for _, ev := range doc.History {
		o := omittedOf(ev)
		cause := string(ev.Cause.Kind)
		if n := len(ev.MoreCauses) + o.MoreCauses; n > 0 {
			cause += fmt.Sprintf("(+%d)", n)
		}
		numbers := fmt.Sprintf("%d->%d", ev.FromGeneration, ev.Generation)
		if mixed {
			kind := "gen:"
			if eventType(doc, ev) == "consumer" {
				kind = "epoch:"
			}
			numbers = kind + numbers
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.Seq, ev.Start.UTC().Format(tableTime),
			numbers, ev.Outcome, cause, cell(strOrDash(ev.Cause.MemberID)),
			cell(strOrDash(clientText(ev.Cause.ClientID, ev.Cause.ClientHost))), joinText(ev), compactDur(ev.SyncMs),
			andMore(waitsText(ev.WaitedFor), o.WaitedFor), andMore(strOrDash(strings.Join(cells(ev.Evicted), ",")), o.Evicted),
			andMore(movesText(ev.Members), o.Members), rejoinCell(ev.Cause.Rejoin))
	}
	switch {
	case doc.HistoryOff && len(doc.History) == 0:
		// No empty table and no "0 completed rebalances": the node
		// counts none.
		fmt.Fprintln(w, historyOffSentence(doc.Group))
	case doc.HistoryOff:
		// Events stored before the node was restarted with history
		// off (or by another node before a failover): shown, but
		// nothing new is recorded or counted.
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, historyOffOlderSentence(doc.Group))
	default:
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, stormSentence(doc.Storm))
	}
	if doc.Waiting != nil {
		// The hint is a command line to paste: the id goes in as one
		// shell word, not as a cell (a group "x; touch PWNED" would run
		// a second command).
		if awayOnly(doc.Waiting) {
			fmt.Fprintf(w, "%s is %s: no rebalance is in progress; static members away for a restart keep their partitions (see cohort group why %s)\n",
				cell(doc.Group), doc.State, shellarg.Arg(doc.Group))
		} else {
			fmt.Fprintf(w, "%s is %s: a rebalance is in progress since %s (see cohort group why %s)\n", cell(doc.Group), doc.State,
				doc.Waiting.Since.UTC().Format(tableTime), shellarg.Arg(doc.Group))
		}
	}
	return nil
}

// eventType is the protocol ev's group had when ev happened: the event's
// own type, or the group's for an event that does not say.
func eventType(doc *group.HistoryDoc, ev group.RebalanceEvent) string {
	if ev.Type != "" {
		return ev.Type
	}
	return doc.Type
}

// joinText is JOIN: for a consumer-protocol event whose earlier targets
// were replaced by bumps it took in, the part of it they were in force
// follows, "12.2s(earlier-targets 10s)": that time went to members
// reconciling (WAITED-FOR names those fenced for it), not to computing the
// last target.
func joinText(ev group.RebalanceEvent) string {
	if ev.Type != "consumer" || ev.EarlierTargetMs <= 0 {
		return compactDur(ev.JoinMs)
	}
	return fmt.Sprintf("%s(earlier-targets %s)", compactDur(ev.JoinMs), compactDur(ev.EarlierTargetMs))
}

// omittedOf is what the stored bound left out of ev's lists (docs/history.md,
// "Stored bound"), zero when nothing.
func omittedOf(ev group.RebalanceEvent) group.Omitted {
	if ev.Omitted == nil {
		return group.Omitted{}
	}
	return *ev.Omitted
}

// andMore adds to a list cell " +N more" when the event left N entries
// out.
func andMore(s string, n int) string {
	if n == 0 {
		return s
	}
	if s == "-" {
		s = ""
	} else {
		s += " "
	}
	return fmt.Sprintf("%s+%d more", s, n)
}

// tableTime is how the history table shows instants (UTC).
const tableTime = "2006-01-02T15:04:05.000Z"

// clientText is CLIENT: client id and host, client@host.
func clientText(client, host string) string {
	host = strings.TrimPrefix(host, "/")
	switch {
	case client == "" || host == "":
		return client + host
	default:
		return client + "@" + host
	}
}

// waitsText is WAITED-FOR: member(phase duration), slowest first, leaving
// out the members that came at once; "evicted" marks those that never came.
func waitsText(ws []group.Wait) string {
	var parts []string
	for _, w := range ws {
		if w.WaitedMs == 0 && !w.Evicted {
			continue
		}
		s := fmt.Sprintf("%s(%s %s", cell(w.MemberID), w.Phase, compactDur(w.WaitedMs))
		if w.Evicted {
			s += " evicted"
		}
		parts = append(parts, s+")")
	}
	return strOrDash(strings.Join(parts, " "))
}

// movesText is MOVED: for each member whose assignment changed, its member
// id and the partitions it gained (+) and lost (-) when the assignment was
// decoded, or "changed(N B)" with the new size when it was not; members
// separated by "; ".
func movesText(ms []group.MemberChange) string {
	var parts []string
	for _, m := range ms {
		var what string
		switch {
		case m.Decoded && (len(m.Added) > 0 || len(m.Removed) > 0):
			what = strings.TrimSpace(tpsText("+", m.Added) + " " + tpsText("-", m.Removed))
		case !m.Decoded && (m.Changed || m.New):
			what = fmt.Sprintf("changed(%d B)", m.AssignmentBytes)
		default:
			continue
		}
		parts = append(parts, cell(m.MemberID)+" "+what)
	}
	return strOrDash(strings.Join(parts, "; "))
}

// tpsText shows partitions as sign+topic(p,p) ..., "" when there are none.
func tpsText(sign string, tps []group.TopicPartitions) string {
	var parts []string
	for _, t := range tps {
		ps := make([]string, len(t.Partitions))
		for i, p := range slices.Sorted(slices.Values(t.Partitions)) {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, sign+cell(t.Topic)+"("+strings.Join(ps, ",")+")")
	}
	return strings.Join(parts, " ")
}

// compactDur is a duration in milliseconds for a table: 350ms, 2.1s, 45s.
func compactDur(ms int64) string { return durText(ms, "") }

// proseDur is a duration in milliseconds for a sentence: 350 ms, 2.1 s.
func proseDur(ms int64) string { return durText(ms, " ") }

func durText(ms int64, sep string) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + sep + "ms"
	}
	tenths := (ms + 50) / 100
	return strconv.FormatFloat(float64(tenths)/10, 'f', -1, 64) + sep + "s"
}

// historyOffSentence says that the node records no rebalance, so that an
// empty history and a storm count of 0 are not read as a quiet group.
func historyOffSentence(id string) string {
	return fmt.Sprintf("The node keeps no rebalance history (cohort serve --group-history 0): no rebalance of %s is recorded, nor counted for storms.", cell(id))
}

// historyOffOlderSentence goes with events a node that keeps no history
// still has from before (a restart with --group-history 0, a failover from
// a node that kept it).
func historyOffOlderSentence(id string) string {
	return fmt.Sprintf("The node keeps no rebalance history (cohort serve --group-history 0): the rebalances of %s shown were recorded before; none since is recorded, nor counted for storms.", cell(id))
}

// stormSentence says whether the group is flagged as rebalancing too often,
// and the causes counted. The detector counts rebalances as they complete
// (a rebalance in progress is told apart by the "Now" sentence).
func stormSentence(s group.StormStatus) string {
	window := time.Duration(s.WindowMs) * time.Millisecond
	if !s.Flagged {
		return fmt.Sprintf("No rebalance storm: %s started within the last %v (a storm is more than %d).",
			plural(s.Count, "completed rebalance"), window, s.Threshold)
	}
	since := ""
	if s.Since != nil {
		since = " since " + s.Since.UTC().Format(tableTime)
	}
	causes := "causes: " + causeCounts(s.Causes)
	if len(s.StartedBy) > 0 && !maps.Equal(s.StartedBy, s.Causes) { // (a node before StartedBy sends Causes only)
		// Members rejoining during the rebalances add causes that did
		// not start one: say what started them first.
		causes = "started by " + causeCounts(s.StartedBy) + "; all causes, with the rejoins during them: " + causeCounts(s.Causes)
	}
	return fmt.Sprintf("Rebalance storm%s: %s started within the last %v, more than %d; %s.",
		since, plural(s.Count, "completed rebalance"), window, s.Threshold, causes)
}

// plural is "1 rebalance", "2 rebalances".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// causeCounts lists causes with their counts, most frequent first.
func causeCounts(cs map[group.CauseKind]int) string {
	type kc struct {
		k group.CauseKind
		n int
	}
	var list []kc
	for k, n := range cs {
		list = append(list, kc{k, n})
	}
	slices.SortFunc(list, func(a, b kc) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(string(a.k), string(b.k))
	})
	var parts []string
	for _, c := range list {
		parts = append(parts, fmt.Sprintf("%s %d", c.k, c.n))
	}
	if len(parts) == 0 {
		return "none recorded"
	}
	return strings.Join(parts, ", ")
}

// writeWhy explains the rebalances of doc, oldest first, one paragraph
// each, then the storm flag and, when the group is rebalancing, what it
// waits for. leader is the group's leader ("" when unknown); hb the
// group's heartbeat interval as the node reported it (nil: unknown); now
// dates the instants (the date is shown when it is not now's); noEvents:
// none were asked for (--last 0).
func writeWhy(w io.Writer, doc *group.HistoryDoc, leader string, hb *heartbeatInterval, now time.Time, noEvents bool) {
	writeWhyQuiet(w, doc, leader, hb, now, noEvents, "")
}

// writeWhyQuiet is writeWhy that also says quiet (quietOf), when not "",
// after what the group is doing now.
func writeWhyQuiet(w io.Writer, doc *group.HistoryDoc, leader string, hb *heartbeatInterval, now time.Time, noEvents bool, quiet string) {
	t := timeFmt{now: now.UTC()}
	switch {
	case doc.HistoryOff && len(doc.History) == 0:
		fmt.Fprintln(w, historyOffSentence(doc.Group))
	case doc.HistoryOff:
		fmt.Fprintf(w, "%s\n\n", historyOffOlderSentence(doc.Group))
	case len(doc.History) == 0 && !noEvents:
		fmt.Fprintf(w, "Group %s has no recorded rebalance.\n\n", cell(doc.Group))
	}
	for _, ev := range doc.History {
		fmt.Fprintln(w, explainEvent(ev, t))
		fmt.Fprintln(w)
	}
	if !doc.HistoryOff {
		fmt.Fprintln(w, stormSentence(doc.Storm))
	}
	fmt.Fprintln(w, nowSentence(doc, leader, hb, t))
	if quiet != "" {
		fmt.Fprintln(w, quiet)
	}
	fmt.Fprintln(w, "(Times are UTC.)")
}

// timeFmt formats instants in UTC for sentences, with the date when it
// differs from now's.
type timeFmt struct{ now time.Time }

func (f timeFmt) at(t time.Time) string {
	t = t.UTC()
	if y, m, d := t.Date(); y == f.now.Year() && m == f.now.Month() && d == f.now.Day() {
		return t.Format("15:04:05.000")
	}
	return t.Format("2006-01-02 15:04:05.000")
}

// memberText names a member in a sentence: member ID (client C, host H,
// instance I), leaving out what is unknown.
func memberText(id, instance, client, host string) string {
	var parts []string
	if client != "" {
		parts = append(parts, "client "+cell(client))
	}
	if host = strings.TrimPrefix(host, "/"); host != "" {
		parts = append(parts, "host "+cell(host))
	}
	if instance != "" {
		parts = append(parts, "instance "+cell(instance))
	}
	s := "member " + cell(strOrDash(id))
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// causeText says what a cause is, as the end of "started because ...".
func causeText(c group.Cause, groupType string, t timeFmt) string {
	who := memberText(c.MemberID, c.InstanceID, c.ClientID, c.ClientHost)
	reason := ""
	if c.Reason != "" {
		reason = fmt.Sprintf(" (reason: %q)", c.Reason)
	}
	detail := ""
	if c.Detail != "" {
		detail = " (" + oneLine(c.Detail) + ")" // may hold member ids and topics
	}
	switch c.Kind {
	case group.CauseMemberJoined:
		return "a new " + who + " joined" + reason + rejoinText(c.Rejoin, t)
	case group.CauseMetadataChanged:
		return who + " rejoined with changed metadata" + detail + reason
	case group.CauseSubscriptionChanged:
		s := who + " changed its subscription"
		if len(c.Topics) > 0 {
			s += " (topics " + strings.Join(cells(c.Topics), ", ") + ")"
		}
		return s + detail
	case group.CauseMemberLeft:
		return who + " left the group" + reason
	case group.CauseSessionTimeout:
		s := who + " stopped heartbeating" + detail
		if c.LastHeartbeat != nil {
			s += fmt.Sprintf(": its last heartbeat was at %s, %s before the coordinator timed it out at %s",
				t.at(*c.LastHeartbeat), proseDur(c.At.Sub(*c.LastHeartbeat).Milliseconds()), t.at(c.At))
		}
		return s
	case group.CauseRebalanceTimeout:
		if groupType == "consumer" && c.Detail == group.ClassicRejoinTimeoutDetail {
			// A classic-protocol member of the group: it owed a
			// JoinGroup or SyncGroup, not a revocation.
			return who + ", a classic-protocol member, did not send the JoinGroup or SyncGroup it owed within its rebalance timeout and was evicted"
		}
		if groupType == "consumer" {
			return who + " did not revoke its partitions within the rebalance timeout and was evicted" + detail
		}
		return who + " did not rejoin within the rebalance timeout and was evicted" + detail
	case group.CauseSyncTimeout:
		return who + " did not send SyncGroup within the rebalance timeout" + detail
	case group.CauseLeaderNotSynced:
		return "the leader, " + who + ", never sent the assignment (SyncGroup) within the rebalance timeout" + detail
	case group.CauseStaticReplaced:
		return "a new process, " + who + ", took over the static member's instance id" + detail
	case group.CauseAdmin:
		s := "an operator acted" + detail
		if c.MemberID != "" || c.InstanceID != "" {
			s += " on " + who
		}
		return s + reason
	case group.CauseLoaded:
		if c.MemberID != "" {
			return "the coordinator loaded the group (a restart or a failover) and " + who + " then rejoined" + detail + reason
		}
		return "the coordinator loaded the group (a restart or a failover) and a member then rejoined" + detail
	case group.CauseTopicsChanged:
		s := "the partitions of subscribed topics changed"
		if len(c.Topics) > 0 {
			s += " (" + strings.Join(cells(c.Topics), ", ") + ")"
		}
		return s + detail
	case group.CauseOther:
		s := "of an event cohort does not classify"
		if c.Detail != "" {
			s = "of another event: " + oneLine(c.Detail)
		}
		if c.MemberID != "" {
			s += " (" + who + ")"
		}
		return s + reason
	default:
		s := "of " + strings.ReplaceAll(string(c.Kind), "_", " ")
		if c.MemberID != "" {
			s += " concerning " + who
		}
		return s + detail + reason
	}
}

// explainEvent is one rebalance in sentences: what started it, what
// happened meanwhile, how long each phase took and whom it waited for, and
// how it ended, with the partitions it moved.
func explainEvent(ev group.RebalanceEvent, t timeFmt) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Rebalance #%d at %s started because %s.", ev.Seq, t.at(ev.Start), causeText(ev.Cause, ev.Type, t))
	if len(ev.MoreCauses) > 0 {
		var more []string
		for _, c := range ev.MoreCauses {
			more = append(more, fmt.Sprintf("at %s %s", t.at(c.At), causeText(c, ev.Type, t)))
		}
		fmt.Fprintf(&b, " While it was in progress, %s.", strings.Join(more, "; "))
	}
	if ev.Type == "consumer" && ev.JoinMs == 0 && ev.SyncMs == 0 && waitingFor(ev.WaitedFor, "") == "" {
		b.WriteString(" The target assignment was computed and reached at once.")
	} else if ev.Type == "consumer" {
		b.WriteString(consumerPhases(ev))
	} else if ev.JoinMs == 0 && ev.SyncMs == 0 && waitingFor(ev.WaitedFor, "") == "" {
		b.WriteString(" The join and sync phases completed at once.")
	} else {
		initial := ""
		if ev.InitialDelay {
			initial = " (it began with the initial rebalance delay, which waits for more members of a group that was empty: --initial-rebalance-delay)"
		}
		fmt.Fprintf(&b, " The join phase took %s%s%s; the sync phase took %s%s.", proseDur(ev.JoinMs), initial,
			waitingFor(ev.WaitedFor, "join"), proseDur(ev.SyncMs), waitingFor(ev.WaitedFor, "sync"))
	}
	if others := waitingFor(otherWaits(ev.WaitedFor), ""); others != "" && ev.Type != "consumer" {
		fmt.Fprintf(&b, " Besides%s.", others)
	}
	o := omittedOf(ev)
	if o.WaitedFor > 0 {
		fmt.Fprintf(&b, " %d more members it waited for are not recorded.", o.WaitedFor)
	}
	if len(ev.Evicted) > 0 || o.Evicted > 0 {
		evicted := strings.Join(cells(ev.Evicted), ", ")
		if o.Evicted > 0 {
			evicted = strings.TrimPrefix(fmt.Sprintf("%s and %d more members", evicted, o.Evicted), " and ")
		}
		fmt.Fprintf(&b, " It evicted %s.", evicted)
	}
	if s := timeoutSetting(ev); s != "" {
		b.WriteString(" " + s)
	}
	b.WriteString(" " + outcomeText(ev, t))
	if moves := movesProse(ev.Members); moves != "" {
		b.WriteString(" " + moves)
	}
	if o.Members > 0 {
		fmt.Fprintf(&b, " %d more members whose assignment changed are not recorded.", o.Members)
	}
	return b.String()
}

// consumerPhases is where a consumer-protocol event's time went. JoinMs is
// until the last target was computed: EarlierTargetMs of it earlier targets
// were in force, the members reconciling to them (the members fenced for
// not doing so are its evicted waits), and the rest the group was Assigning,
// a target being computed at a member's heartbeat (or after the batching
// delay). Neither is the assignor's own time, which the event does not
// measure; SyncMs is until every member had reached the last target (or
// the event ended otherwise).
func consumerPhases(ev group.RebalanceEvent) string {
	assigning := proseDur(ev.JoinMs - ev.EarlierTargetMs)
	if ev.EarlierTargetMs <= 0 {
		s := fmt.Sprintf(" The target assignment was computed after %s", proseDur(ev.JoinMs))
		if ev.JoinMs > 0 {
			s += " (the group was Assigning: a target is computed at a member's heartbeat, so it waited for one)"
		}
		return s + fmt.Sprintf("; the members then took %s to reach it%s.", proseDur(ev.SyncMs), waitingFor(ev.WaitedFor, ""))
	}
	var before, last []group.Wait
	for _, w := range ev.WaitedFor {
		if w.Evicted {
			before = append(before, w)
		} else {
			last = append(last, w)
		}
	}
	s := fmt.Sprintf(" For %s of it the members were reconciling to earlier targets, which bumps it took in replaced%s.",
		proseDur(ev.EarlierTargetMs), waitingFor(before, ""))
	if ev.JoinMs > ev.EarlierTargetMs {
		s += fmt.Sprintf(" The group then had no target for %s (Assigning: a target is computed at a member's heartbeat, so it waited for one).", assigning)
	}
	return s + fmt.Sprintf(" The last target assignment, at group epoch %d, was computed %s after the start, and the members took %s to reach it%s.",
		ev.Generation, proseDur(ev.JoinMs), proseDur(ev.SyncMs), waitingFor(last, ""))
}

// timeoutSetting is the sentence that says, for an event that evicted a
// member for a rebalance or sync timeout, which timeout that was, how long,
// and which client setting it is; "" for any other event.
func timeoutSetting(ev group.RebalanceEvent) string {
	const setting = "(franz-go: kgo.RebalanceTimeout)"
	phase := ""
	for _, c := range append([]group.Cause{ev.Cause}, ev.MoreCauses...) {
		switch {
		case c.Kind == group.CauseRebalanceTimeout && ev.Type == "consumer" && c.Detail != group.ClassicRejoinTimeoutDetail:
			return "A member has its own rebalance timeout to give partitions up, counted from the heartbeat that told it to:" +
				" the client's rebalance timeout, which the Java client takes from max.poll.interval.ms " + setting + "," +
				" so an evicted member most likely spent longer than that in its callback for revoked partitions;" +
				" raise the setting in that client, or shorten that work."
		case c.Kind == group.CauseRebalanceTimeout && ev.Type != "consumer":
			phase = "join"
		case (c.Kind == group.CauseSyncTimeout || c.Kind == group.CauseLeaderNotSynced) && ev.Type != "consumer" && phase == "":
			phase = "sync"
		}
	}
	if phase == "" {
		return ""
	}
	var waited int64
	for _, w := range ev.WaitedFor {
		if w.Evicted && w.Phase == phase {
			waited = max(waited, w.WaitedMs)
		}
	}
	here := ""
	if waited > 0 {
		here = " (" + proseDur(waited) + " here)"
	}
	s := "The " + phase + " phase waits for each member up to the group's rebalance timeout, the longest one its members gave when they joined" +
		here + ": that is the client's rebalance timeout, which the Java client and librdkafka take from max.poll.interval.ms " + setting + ","
	if phase == "join" {
		return s + " so an evicted member most likely spent longer than that between two polls or in its callback for revoked partitions;" +
			" raise the setting in that client, or shorten that work."
	}
	return s + " so an evicted member did not send SyncGroup in that time after its JoinGroup was answered (the leader computes the assignment" +
		" there); raise the setting in that client if its assignor or its callbacks need longer."
}

// waitingFor is ", waiting for A (2.1 s), B (0.3 s, then evicted)" for the
// waits of phase ("": every phase, each then named), slowest first as
// recorded; members that came at once are left out, and it is "" when none
// is left.
func waitingFor(ws []group.Wait, phase string) string {
	var parts []string
	for _, w := range ws {
		if phase != "" && w.Phase != phase || w.WaitedMs == 0 && !w.Evicted {
			continue
		}
		name := cell(w.MemberID)
		if w.InstanceID != "" {
			name += " (instance " + cell(w.InstanceID) + ")"
		}
		what := proseDur(w.WaitedMs)
		if phase == "" {
			what = w.Phase + ", " + what
		}
		if w.Evicted {
			what += ", then evicted"
		}
		parts = append(parts, name+" ("+what+")")
	}
	if len(parts) == 0 {
		return ""
	}
	return ", waiting for " + strings.Join(parts, ", ")
}

// otherWaits are the waits of a classic rebalance in neither the join nor
// the sync phase.
func otherWaits(ws []group.Wait) []group.Wait {
	var out []group.Wait
	for _, w := range ws {
		if w.Phase != "join" && w.Phase != "sync" {
			out = append(out, w)
		}
	}
	return out
}

// notYet says what a member waited for has not done yet.
func notYet(phase string) string {
	switch phase {
	case "join":
		return "has not rejoined"
	case "sync":
		return "has not sent SyncGroup"
	case "revoke":
		return "has not revoked the partitions it must give up"
	case "assign":
		return "has not reached its target assignment (it waits for partitions others still hold, or has not heartbeated since)"
	default:
		return "has not completed the " + phase + " phase"
	}
}

// outcomeText says how a rebalance ended.
func outcomeText(ev group.RebalanceEvent, t timeFmt) string {
	gen := "generation"
	if ev.Type == "consumer" {
		gen = "group epoch"
	}
	switch ev.Outcome {
	case "stable":
		s := fmt.Sprintf("It ended at %s with %s %d", t.at(ev.End), gen, ev.Generation)
		var with []string
		if ev.Leader != "" {
			with = append(with, "leader "+cell(ev.Leader))
		}
		switch {
		case ev.Protocol != "" && ev.Type == "consumer":
			with = append(with, "assignor "+cell(ev.Protocol))
		case ev.Protocol != "":
			with = append(with, "protocol "+cell(ev.Protocol))
		}
		if len(with) > 0 {
			s += " (" + strings.Join(with, ", ") + ")"
		}
		return s + "."
	case "empty":
		return fmt.Sprintf("It ended at %s with the group empty (%s %d).", t.at(ev.End), gen, ev.Generation)
	case "superseded":
		return fmt.Sprintf("Another rebalance started at %s before this one completed.", t.at(ev.End))
	case "failed":
		return fmt.Sprintf("It failed at %s: the new assignment could not be stored.", t.at(ev.End))
	default:
		return fmt.Sprintf("It ended at %s (%s), %s %d.", t.at(ev.End), ev.Outcome, gen, ev.Generation)
	}
}

// movesProse says which partitions the rebalance moved, or which members'
// assignments changed when they are not decoded.
func movesProse(ms []group.MemberChange) string {
	var parts []string
	for _, m := range ms {
		var got []string
		if m.Decoded {
			if len(m.Added) > 0 {
				got = append(got, "gained "+tpsText("", m.Added))
			}
			if len(m.Removed) > 0 {
				got = append(got, "lost "+tpsText("", m.Removed))
			}
		} else if m.Changed || m.New {
			got = append(got, fmt.Sprintf("got a new assignment of %d bytes", m.AssignmentBytes))
		}
		if len(got) == 0 {
			continue
		}
		name := cell(m.MemberID)
		if m.New {
			name += " (new)"
		}
		parts = append(parts, name+" "+strings.Join(got, " and "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Moved: " + strings.Join(parts, "; ") + "."
}

// awayOnly reports whether every member w lists is a static member away for
// a restart (epoch -2): the group is then Reconciling with no rebalance in
// progress.
func awayOnly(w *group.Waiting) bool {
	if len(w.Members) == 0 {
		return false
	}
	for _, m := range w.Members {
		if m.Phase != "away" {
			return false
		}
	}
	return true
}

// awayDeadline ends the sentence about a static member away: when its
// session ends and its partitions go to the others.
func awayDeadline(m group.WaitingMember, t timeFmt) string {
	if m.Deadline == nil {
		return "."
	}
	return fmt.Sprintf("; unless a member with that instance id joins before its session runs out at %s, the group then gives its partitions to the others.", t.at(*m.Deadline))
}

// nowSentence says what the group is doing now: settled, or what the
// rebalance in progress waits for, since when, and when the timeout
// evicts each member it waits for.
func nowSentence(doc *group.HistoryDoc, leader string, hb *heartbeatInterval, t timeFmt) string {
	w := doc.Waiting
	if w == nil {
		switch {
		case doc.Type == "consumer" && doc.State != "Stable" && doc.State != "Empty":
			return fmt.Sprintf("Now the group is %s; cohort does not yet say what a consumer-protocol group waits for.", doc.State)
		default:
			return fmt.Sprintf("Now the group is %s: no rebalance is in progress.", doc.State)
		}
	}
	var b strings.Builder
	if awayOnly(w) {
		// Reconciling only because static members are away (epoch -2):
		// the others have reached their targets.
		fmt.Fprintf(&b, "Now the group is %s, but no rebalance is in progress: the members present have reached their target assignment, and it waits for static members away for a restart.", w.State)
		for _, m := range w.Members {
			fmt.Fprintf(&b, " Static %s left", memberText(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost))
			if !m.Since.IsZero() {
				fmt.Fprintf(&b, " at %s", t.at(m.Since))
			}
			b.WriteString(" and keeps its partitions for its instance id")
			b.WriteString(awayDeadline(m, t))
		}
		return b.String()
	}
	fmt.Fprintf(&b, "Now the group is %s: a rebalance is in progress since %s", w.State, t.at(w.Since))
	if w.Cause != nil {
		fmt.Fprintf(&b, ", started because %s", causeText(*w.Cause, doc.Type, t))
	}
	b.WriteString(".")
	if len(w.Members) == 0 {
		if doc.Type == "consumer" {
			b.WriteString(" It waits for no member: the next heartbeat computes the target assignment.")
		} else {
			b.WriteString(" It waits for no member.")
		}
		return b.String()
	}
	for _, m := range w.Members {
		what := notYet(m.Phase)
		if m.Phase == "sync" && leader != "" && m.MemberID == leader {
			what = "is the leader and has not sent the assignment (SyncGroup)"
		}
		if m.Phase == "away" {
			fmt.Fprintf(&b, " Static %s is away for a restart (epoch -2)", memberText(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost))
			if !m.Since.IsZero() {
				fmt.Fprintf(&b, " since %s", t.at(m.Since))
			}
			b.WriteString(", keeping its partitions for its instance id")
			b.WriteString(awayDeadline(m, t))
			continue
		}
		fmt.Fprintf(&b, " It waits for %s, which %s since %s", memberText(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost), what, t.at(m.Since))
		if m.Deadline != nil {
			fmt.Fprintf(&b, "; the timeout evicts it at %s unless it does so before.", t.at(*m.Deadline))
		} else if m.Phase == "revoke" {
			b.WriteString("; it learns so at its next heartbeat, and its rebalance timeout starts then.")
		} else if doc.Type == "consumer" {
			b.WriteString("; nothing evicts it for that but its session timeout.")
		} else {
			b.WriteString("; no timeout is running that would evict it for that.")
		}
	}
	if waitsForHeartbeats(doc) {
		b.WriteString(heartbeatSentence(doc.Group, hb))
	}
	return b.String()
}

// waitsForHeartbeats: doc is a consumer-protocol group whose rebalance in
// progress waits for a member that must hear of its target (to revoke or
// to take partitions), which it does at its next heartbeat. Only then does
// "why" say how often members heartbeat, and ask the node for it.
func waitsForHeartbeats(doc *group.HistoryDoc) bool {
	if doc.Type != "consumer" || doc.Waiting == nil || awayOnly(doc.Waiting) {
		return false
	}
	return slices.ContainsFunc(doc.Waiting.Members, func(m group.WaitingMember) bool { return m.Phase == "assign" || m.Phase == "revoke" })
}

// heartbeatInterval is a consumer group's consumer.heartbeat.interval.ms
// as the node reports it: its value and where it comes from (source as
// "cohort group config" shows it: group, node or default).
type heartbeatInterval struct {
	ms     int64
	source string
}

// groupHeartbeatInterval asks the node for group id's heartbeat interval
// (DescribeConfigs on the group, which needs DESCRIBE_CONFIGS on it besides
// the DESCRIBE that "why" needs). The group's coordinator is asked: a
// cluster's nodes share the groups' own settings, but each has its own
// flags, and the coordinator's apply. (If it cannot be found, any node is.)
// nil when the node does not say: refused, an error, no such config (not
// cohort, or an older one) or a value that is not a positive count of
// milliseconds. "why" then gives the general rule, which is not wrong,
// instead.
func groupHeartbeatInterval(ctx context.Context, cl *kgo.Client, id string) *heartbeatInterval {
	const name = "consumer.heartbeat.interval.ms"
	var to kmsg.Requestor = cl
	if c, ok := kadm.NewClient(cl).FindGroupCoordinators(ctx, id)[id]; ok && c.Err == nil {
		to = cl.Broker(int(c.NodeID))
	}
	configs, err := describeGroupConfigs(ctx, to, id, name)
	if err != nil {
		return nil
	}
	for _, c := range configs {
		if c.Name != name || c.Value == nil {
			continue
		}
		ms, err := strconv.ParseInt(*c.Value, 10, 64)
		if err != nil || ms <= 0 {
			return nil
		}
		return &heartbeatInterval{ms: ms, source: groupConfigSource(c.Source)}
	}
	return nil
}

// heartbeatSentence says when the members of consumer group id hear of a
// new target: at their next heartbeat, the usual reason why reaching it
// takes seconds. hb is the group's interval and where it comes from; when
// the node did not say (nil), the sentence gives the default and the
// command that shows the group's.
func heartbeatSentence(id string, hb *heartbeatInterval) string {
	var every string
	switch {
	case hb == nil:
		every = " a member at rest heartbeats every consumer.heartbeat.interval.ms, 5 s by default" +
			" (the node's cohort serve --consumer-heartbeat-interval, or the group's own: cohort group config " + shellarg.Arg(id) + "),"
	case hb.source == "group":
		every = fmt.Sprintf(" a member at rest heartbeats every %s, this group's own consumer.heartbeat.interval.ms (cohort group config %s),",
			exactDur(hb.ms), shellarg.Arg(id))
	case hb.source == "default":
		every = fmt.Sprintf(" a member at rest heartbeats every %s, the default consumer.heartbeat.interval.ms, which neither this group nor the node sets,",
			exactDur(hb.ms))
	default:
		every = fmt.Sprintf(" a member at rest heartbeats every %s, the node's consumer.heartbeat.interval.ms (cohort serve --consumer-heartbeat-interval), which this group does not set for itself,",
			exactDur(hb.ms))
	}
	return " Members learn of a new target assignment only at their next heartbeat, which is why reaching it usually takes seconds:" +
		every +
		" and once it has heard, cohort asks it to heartbeat every 500 ms or less until the group is Stable" +
		" (a classic-protocol member heartbeats at its client's heartbeat.interval.ms)."
}

// exactDur is a duration in milliseconds for a sentence, as proseDur when
// that is exact (5 s, 2.5 s), in milliseconds otherwise (2550 ms).
func exactDur(ms int64) string {
	if ms >= 1000 && ms%100 != 0 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return proseDur(ms)
}

// quietOf is what "group why" says of the members of id that have been
// silent for more than group.QuietShare of their session (cohort's
// LastHeardTag), with how long until their session timeout evicts them: a
// member whose process hangs looks like any other until then. "" when none
// is; a group that cannot be described is said so.
func quietOf(ctx context.Context, cl *kgo.Client, id string) string {
	descs, err := describeGroups(ctx, cl, []string{id})
	if err != nil {
		return "(How long ago its members were last heard from is unknown: " + cell(err.Error()) + ".)"
	}
	var out []string
	for _, g := range descs {
		if s := quietSentence(g.Members); s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, "\n")
}

// quietSentence is one sentence per member of ms silent for more than
// group.QuietShare of its session, "" when none is.
func quietSentence(ms []memberDesc) string {
	var b strings.Builder
	for _, m := range ms {
		l, ok := m.lastHeard()
		if !ok || !l.Quiet() {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s has not been heard from for %s, more than half of its %s session", memberText(m.MemberID, deref(m.InstanceID), m.ClientID, m.Host),
			proseDur(l.Silent.Milliseconds()), proseDur(l.Session.Milliseconds()))
		if in := l.EvictIn(); in > 0 {
			fmt.Fprintf(&b, ": unless it heartbeats, its session timeout evicts it in %s.", proseDur(in.Milliseconds()))
		} else {
			b.WriteString(": its session has run out, and the coordinator evicts it now.")
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "Quiet members: " + b.String()
}

// rejoinCell is REJOIN-OF: the member whose eviction the event's joining
// member follows, why and how long before, "OLD (session_timeout, 41s
// before)"; "-" when none (the last column: it may hold spaces).
func rejoinCell(r *group.Rejoin) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s, %s before)", cell(r.MemberID), r.Kind, compactDur(r.AfterMs))
}

// rejoinText ends the sentence of a member_joined cause linked to an
// eviction: ", rejoining after the eviction of member OLD (session timeout
// at 10:00:03.000) 41 s earlier".
func rejoinText(r *group.Rejoin, t timeFmt) string {
	if r == nil {
		return ""
	}
	by := "same client id and host"
	if r.By == "instance_id" {
		by = "same instance id"
	}
	return fmt.Sprintf(", rejoining after the eviction of member %s (%s at %s) %s earlier (%s)", cell(r.MemberID),
		strings.ReplaceAll(string(r.Kind), "_", " "), t.at(r.At), proseDur(r.AfterMs), by)
}

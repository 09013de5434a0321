package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/group"
)

// listedGroupJSON is one group of "cohort groups".
type listedGroupJSON struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	Type         string `json:"type"`
	ProtocolType string `json:"protocol_type"`
}

// deletedGroupJSON is one group of "cohort group delete".
type deletedGroupJSON struct {
	Group   string  `json:"group"`
	Deleted bool    `json:"deleted"`
	Error   *string `json:"error"`
}

// describeFlags are the flags of "group describe" and "offsets ID".
type describeFlags struct {
	members, offsets, state, verbose, all bool
}

// The usage of "cohort groups" and of each "cohort group" action.
var groupUsages = map[string]string{
	"groups": `usage: cohort groups [--state S[,S...]] [--type classic|consumer[,...]]
  lists groups: state, type (classic or consumer) and protocol type
`,
	"describe": `usage: cohort group describe ID...|--all-groups [--state] [--members] [--offsets] [--verbose]
                            [--data-bootstrap HOST:PORT]
  the state table (coordinator, state, protocol type and protocol, generation,
  leader, member count; for consumer groups: type, state, assignor, group and
  assignment epochs), the members table (client id, host, instance id,
  assignment; for consumer groups also rack, member epoch, subscription,
  current assignment, partitions still to revoke and target assignment) and
  the offsets table (committed offset, log end, lag, owner);
  --state/--members/--offsets pick tables (default: all)
`,
	"delete": `usage: cohort group delete ID... [--dry-run | --yes]
  deletes empty groups and their committed offsets; --dry-run shows each
  group's state, members and offsets and whether it can be deleted, and
  deletes nothing; on a terminal it shows them and asks first, unless --yes
`,
	"config": `usage: cohort group config ID [--set NAME=VALUE]... [--delete NAME]...
       cohort group config --list
  a consumer group's own settings (consumer.session.timeout.ms,
  consumer.heartbeat.interval.ms, consumer.assignment.interval.ms, in ms) and
  where each comes from: group, node (a cohort serve flag) or default;
  --set/--delete change them first (the group need not exist; its members see
  a change at their next heartbeat); --list: the groups that have settings of
  their own
`,
	"history": `usage: cohort group history ID [--last N]
  the group's rebalances, one row each: start, generations, outcome, cause and
  its member, join and sync durations, members waited for, evictions,
  partitions moved; then the storm flag (--output json: the history document)
`,
	"why": `usage: cohort group why ID [--last N]
  the last rebalances (default 3) in sentences, the storm flag, and what a
  rebalance in progress waits for now
`,
}

// groupFlags are the flags of one group command.
type groupFlags struct {
	*cmdFlags
	df             describeFlags
	hf             historyFlags
	states, types  string // groups
	sets, dels     stringsFlag
	listConfigured bool
	del            deleteFlags
}

// groupFamily is "cohort group describe|delete|config|history|why".
var groupFamily = family[*groupFlags]{
	name:    "group",
	actions: []string{"describe", "delete", "config", "history", "why"},
	usage: `usage:
  cohort group describe ID...|--all-groups   state, members, assignments, offsets, lag
  cohort group delete ID...                  delete empty groups and their offsets
  cohort group config ID [--set N=V]... [--delete N]...  a consumer group's own settings
  cohort group config --list                 the groups that have settings of their own
  cohort group history ID [--last N]         the group's rebalances
  cohort group why ID [--last N]             the last rebalances in sentences
  (cohort groups lists them; cohort group ACTION -h: the action's flags)
`,
	build: func(e env, action string) (*flag.FlagSet, *groupFlags) {
		f := &groupFlags{cmdFlags: newCmdFlags(e, "group "+action, groupUsages[action])}
		fs, all := f.fs, action == anyAction
		if all || action == "describe" {
			f.d.register(fs)
			fs.BoolVar(&f.df.members, "members", false, "show the members table")
			fs.BoolVar(&f.df.offsets, "offsets", false, "show the offsets table (committed offsets, log end and lag)")
			fs.BoolVar(&f.df.state, "state", false, "show the state table")
			fs.BoolVar(&f.df.verbose, "verbose", false, "more columns in the offsets table (log start, leader epoch, metadata)")
			fs.BoolVar(&f.df.all, "all-groups", false, "every group")
		}
		switch action {
		case "history", anyAction:
			fs.IntVar(&f.hf.last, "last", 0, "only the `N` latest rebalances (default: every one kept)")
		case "why":
			fs.IntVar(&f.hf.last, "last", whyDefaultLast, "only the `N` latest rebalances")
		}
		if all || action == "delete" {
			f.del.register(fs)
		}
		if all || action == "config" {
			fs.Var(&f.sets, "set", "set `NAME=VALUE` (repeatable)")
			fs.Var(&f.dels, "delete", "remove `NAME`, back to the node's value (repeatable)")
			fs.BoolVar(&f.listConfigured, "list", false, "list the groups that have settings of their own")
			limitKafkaStrings(fs, map[string]func(string) []string{"delete": nil, "set": func(s string) []string {
				name, value, _ := strings.Cut(s, "=")
				return []string{name, value}
			}})
		}
		return fs, f
	},
}

// groupsCmd runs "cohort groups" and "cohort group describe|delete|config|history|why".
func groupsCmd(e env, cmd string, args []string) error {
	if cmd == "groups" {
		f := &groupFlags{cmdFlags: newCmdFlags(e, cmd, groupUsages[cmd])}
		f.fs.StringVar(&f.states, "state", "", "list only groups in these `states`, comma-separated, any case (classic: Empty, Stable, PreparingRebalance, CompletingRebalance; consumer: Empty, Assigning, Reconciling, Stable)")
		f.fs.StringVar(&f.types, "type", "", "list only groups of these `types`, comma-separated: classic (JoinGroup/SyncGroup) or consumer (KIP-848, ConsumerGroupHeartbeat)")
		if err := f.parseNoArgs(args); err != nil {
			return err
		}
		stateList, err := checkFilter("--state", splitList(f.states), groupStates)
		if err != nil {
			return err
		}
		typeList, err := checkFilter("--type", splitList(f.types), groupTypes)
		if err != nil {
			return err
		}
		return listGroups(e, f.cmdFlags, stateList, typeList)
	}
	action, ids, f, err := groupFamily.parse(e, args)
	if err != nil {
		return err
	}
	switch {
	case action == "" && len(ids) == 0:
		return usagef("group: want describe|delete|config|history|why ID...")
	case action == "":
		return usagef("group: unknown action %q: want describe, delete, config, history or why", ids[0])
	}
	if err := f.check(); err != nil {
		return err
	}
	f.fs.Visit(func(fl *flag.Flag) { f.hf.lastSet = f.hf.lastSet || fl.Name == "last" })
	df := f.df
	switch action {
	case "history", "why":
		return historyCmd(e, f.cmdFlags, f.hf, action == "why", ids)
	case "describe":
		switch {
		case df.all && len(ids) > 0:
			return usagef("group describe: want group ids or --all-groups, not both")
		case !df.all && len(ids) == 0:
			return usagef("group describe: want group ids or --all-groups")
		}
		return describeCmd(e, f.cmdFlags, df, ids)
	case "delete":
		if len(ids) == 0 {
			return usagef("group delete: want one or more group ids")
		}
		if err := f.del.check("group delete"); err != nil {
			return err
		}
		return deleteGroups(e, f.cmdFlags, f.del, ids)
	default: // config
		if f.listConfigured {
			if len(ids) > 0 || len(f.sets) > 0 || len(f.dels) > 0 {
				return usagef("group config --list: takes no group id, --set or --delete")
			}
			return listConfiguredGroups(e, f.cmdFlags)
		}
		if len(ids) != 1 {
			return usagef("group config: want one group id (or --list)")
		}
		return groupConfigCmd(e, f.cmdFlags, ids[0], f.sets, f.dels)
	}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// The values "groups" filters on: the states ListGroups gives cohort's
// classic and consumer groups (a Dead group is never listed; the console's
// ?state= takes the same), and the group types cohort has.
var (
	groupStates = group.ListedStates()
	groupTypes  = []string{"classic", "consumer"}
)

// checkFilter checks the values of filter flag name against the accepted
// ones, without regard to case, and returns them spelled as accepted. An
// unknown value is a usage error: a typo would otherwise filter out every
// group and read as "no groups".
func checkFilter(name string, values, accepted []string) ([]string, error) {
	out := make([]string, 0, len(values))
	for _, v := range values {
		i := slices.IndexFunc(accepted, func(a string) bool { return strings.EqualFold(a, v) })
		if i < 0 {
			return nil, usagef("%s %q: want one of %s (comma-separated, any case)", name, v, strings.Join(accepted, ", "))
		}
		out = append(out, accepted[i])
	}
	return out, nil
}

func listGroups(e env, f *cmdFlags, states, types []string) error {
	cl, ctx, done, err := f.c.open()
	if err != nil {
		return err
	}
	defer done()
	// The filters go to the server (ListGroups v4+ states, v5+ types) and
	// are applied here too, for servers that ignore them. ListGroups goes
	// to every node: one that just died (still listed until its lease
	// ends, in cluster mode) is waited out, as describe and offsets do.
	adm := kadm.NewClient(cl)
	gs, err := untilReachable(ctx, cl, func() (kadm.ListedGroups, error) { return adm.ListGroupsByType(ctx, types, states...) })
	if err != nil {
		return f.c.fail("groups", err)
	}
	list := []listedGroupJSON{}
	for _, g := range gs.Sorted() {
		if len(states) > 0 && !containsFold(states, g.State) || len(types) > 0 && !containsFold(types, g.GroupType) {
			continue
		}
		list = append(list, listedGroupJSON{Group: g.Group, State: g.State, Type: g.GroupType, ProtocolType: g.ProtocolType})
	}
	if f.o.json() {
		return writeJSON(e.stdout, map[string]any{"groups": list})
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "GROUP\tSTATE\tTYPE\tPROTOCOL-TYPE")
	for _, g := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(g.Group), strOrDash(g.State), strOrDash(g.Type), cell(strOrDash(g.ProtocolType)))
	}
	return tw.Flush()
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(v string) bool { return strings.EqualFold(v, s) })
}

func describeCmd(e env, f *cmdFlags, df describeFlags, ids []string) error {
	cl, ctx, done, err := f.c.open()
	if err != nil {
		return err
	}
	defer done()
	adm := kadm.NewClient(cl)
	if df.all {
		gs, err := untilReachable(ctx, cl, func() (kadm.ListedGroups, error) { return adm.ListGroups(ctx) })
		if err != nil {
			return f.c.fail("group describe --all-groups", err)
		}
		ids = gs.Groups()
		slices.Sort(ids)
	}
	if !df.members && !df.offsets && !df.state {
		df.members, df.offsets, df.state = true, true, true
	}
	needOffsets := df.offsets || f.o.json()
	var data *kadm.Client
	if needOffsets {
		if data, err = f.d.open(ctx); err != nil {
			return err
		}
	}
	descs, errs, failed := describeGroupsEach(ctx, cl, ids)
	if needOffsets {
		if err := addOffsets(ctx, cl, adm, data, descs, e.stderr); err != nil {
			return errors.Join(err, failed)
		}
	}
	if f.o.json() {
		// Each group named has its entry, in order: a group that could
		// not be described has its error there (as in group delete),
		// besides the line on standard error.
		entries := make([]any, 0, len(ids))
		described := map[string]*groupDesc{}
		for _, g := range descs {
			described[g.Group] = g
		}
		for _, id := range ids {
			if g, ok := described[id]; ok {
				entries = append(entries, g)
			} else {
				entries = append(entries, failedGroupEntry(id, describeErr(errs, id)))
			}
		}
		return errors.Join(writeJSON(e.stdout, map[string]any{"groups": entries}), failed)
	}
	if len(descs) == 0 && failed != nil {
		return failed // no table of nothing
	}
	return errors.Join(writeDescribe(e.stdout, descs, df, data != nil), failed)
}

// writeDescribe prints the tables df selects, separated by blank lines.
// Classic and consumer groups have state and members tables of their own
// (each printed when there are groups of its type; the classic ones when
// there are none at all); the offsets table is common.
func writeDescribe(w io.Writer, descs []*groupDesc, df describeFlags, haveData bool) error {
	classic, consumer := byType(descs)
	withClassic := len(classic) > 0 || len(consumer) == 0
	sep := ""
	table := func(head string, groups []*groupDesc, row func(tw io.Writer, g *groupDesc)) error {
		fmt.Fprint(w, sep)
		sep = "\n"
		tw := newTable(w)
		fmt.Fprintln(tw, head)
		for _, g := range groups {
			row(tw, g)
		}
		return tw.Flush()
	}
	var err error
	if df.state && withClassic {
		err = errors.Join(err, table("GROUP\tCOORDINATOR\tSTATE\tPROTOCOL-TYPE\tPROTOCOL\tGENERATION\tLEADER\tMEMBERS", classic,
			func(tw io.Writer, g *groupDesc) {
				leader := "-"
				if g.Leader != nil {
					leader = cell(strOrDash(*g.Leader))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", cell(g.Group), g.Coordinator, g.State, cell(strOrDash(g.ProtocolType)),
					cell(strOrDash(g.Protocol)), orDash(g.Generation), leader, g.MemberCount)
			}))
	}
	if df.state && len(consumer) > 0 {
		err = errors.Join(err, table("GROUP\tCOORDINATOR\tTYPE\tSTATE\tASSIGNOR\tGROUP-EPOCH\tASSIGNMENT-EPOCH\tMEMBERS", consumer,
			func(tw io.Writer, g *groupDesc) {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", cell(g.Group), g.Coordinator, g.Type, g.State, cell(strOrDash(deref(g.Assignor))),
					orDash(g.GroupEpoch), orDash(g.AssignmentEpoch), g.MemberCount)
			}))
	}
	if df.members && withClassic {
		err = errors.Join(err, table("GROUP\tMEMBER-ID\tINSTANCE-ID\tCLIENT-ID\tHOST\tPARTITIONS\tASSIGNMENT\tLAST-HEARD", classic,
			func(tw io.Writer, g *groupDesc) {
				for _, m := range g.Members {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(g.Group), cell(m.MemberID), cell(strOrDash(deref(m.InstanceID))),
						cell(strOrDash(m.ClientID)), cell(strOrDash(m.Host)), m.partitionCount(), m.assignmentText(), m.lastHeardText())
				}
			}))
	}
	if df.members && len(consumer) > 0 {
		// MEMBER-TYPE only when a group has classic-protocol members (an
		// upgrade under way): the table of groups that have none keeps
		// its columns, and the column, when there, comes last.
		head, typed := "GROUP\tMEMBER-ID\tINSTANCE-ID\tCLIENT-ID\tHOST\tRACK\tMEMBER-EPOCH\tSUBSCRIPTION\tCURRENT\tTO-REVOKE\tTARGET\tLAST-HEARD", hasClassicMembers(consumer)
		if typed {
			head += "\tMEMBER-TYPE"
		}
		err = errors.Join(err, table(head, consumer,
			func(tw io.Writer, g *groupDesc) {
				for _, m := range g.Members {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", cell(g.Group), cell(m.MemberID), cell(strOrDash(deref(m.InstanceID))),
						cell(strOrDash(m.ClientID)), cell(strOrDash(m.Host)), cell(strOrDash(deref(m.Rack))), orDash(m.MemberEpoch), m.subscriptionText(),
						partitionsText(m.Assignment), partitionsText(m.Revoking), partitionsText(m.Target), m.lastHeardText())
					if typed {
						fmt.Fprintf(tw, "\t%s", cell(m.MemberType))
					}
					fmt.Fprintln(tw)
				}
			}))
	}
	if err != nil {
		return err
	}
	if df.offsets {
		fmt.Fprint(w, sep)
		writeOffsets(w, descs, df.verbose, haveData)
	}
	return nil
}

// hasClassicMembers reports whether a consumer group of groups has a member
// that speaks the classic protocol (JoinGroup/SyncGroup), as it does while
// its members are upgraded one by one.
func hasClassicMembers(groups []*groupDesc) bool {
	for _, g := range groups {
		if slices.ContainsFunc(g.Members, func(m memberDesc) bool { return m.MemberType == "classic" }) {
			return true
		}
	}
	return false
}

// writeOffsets prints the offsets table of descs and each group's total lag.
func writeOffsets(w io.Writer, descs []*groupDesc, verbose, haveData bool) {
	tw := newTable(w)
	head := "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tMEMBER-ID\tHOST\tCLIENT-ID"
	if verbose {
		head += "\tLOG-START-OFFSET\tLEADER-EPOCH\tMETADATA"
	}
	fmt.Fprintln(tw, head)
	for _, g := range descs {
		for _, r := range g.Offsets {
			member, host, client := "-", "-", "-"
			if r.MemberID != nil {
				member, host, client = cell(*r.MemberID), cell(strOrDash(r.Host)), cell(strOrDash(r.ClientID))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s", cell(g.Group), cell(r.Topic), r.Partition, orDash(r.CurrentOffset),
				orDash(r.LogEndOffset), orDash(r.Lag), member, host, client)
			if verbose {
				fmt.Fprintf(tw, "\t%s\t%s\t%s", orDash(r.LogStartOffset), orDash(r.LeaderEpoch), cell(strOrDash(r.Metadata)))
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
	for _, g := range descs {
		switch {
		case !haveData:
			fmt.Fprintf(w, "total lag of %s: - (lag needs --data-bootstrap)\n", cell(g.Group))
		default:
			fmt.Fprintf(w, "total lag of %s: %s\n", cell(g.Group), orDash(g.TotalLag))
		}
	}
}

func deleteGroups(e env, f *cmdFlags, del deleteFlags, ids []string) error {
	// Each group answered once, in the order first named: "delete g g"
	// reported g deleted twice.
	ids = distinctIDs(ids)
	cl, ctx, done, err := f.c.open()
	if err != nil {
		return err
	}
	defer done()
	var wouldFail error // of a dry run
	preview := func(w io.Writer, asJSON bool) (int, error) {
		rows, n, err := previewGroupDelete(ctx, cl, ids)
		if err != nil {
			return 0, err
		}
		list := []deletedGroupJSON{}
		for _, r := range rows {
			if r.err != nil {
				wouldFail = errors.Join(wouldFail, fmt.Errorf("delete %s: %w", r.group, r.err))
			}
			list = append(list, deletedGroupJSON{Group: r.group, Deleted: false, Error: errText(r.err)})
		}
		if asJSON {
			return n, writeJSON(w, map[string]any{"groups": list})
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "GROUP\tSTATE\tMEMBERS\tOFFSETS\tTO DELETE")
		for _, r := range rows {
			res := "yes"
			if r.err != nil {
				res = "no: " + r.err.Error()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(r.group), strOrDash(r.state), orDash(r.members), orDash(r.offsets), cell(res))
		}
		return n, tw.Flush()
	}
	ok, err := del.gate(e, "group delete", "delete these groups and their offsets?", f.o.json(), preview)
	if !ok || err != nil {
		return errors.Join(err, wouldFail)
	}
	rs := kadm.DeleteGroupResponses{}
	adm := kadm.NewClient(cl)
	inBatches(ids, func(batch []string) {
		if err != nil {
			return
		}
		var got kadm.DeleteGroupResponses
		if got, err = adm.DeleteGroups(ctx, batch...); err == nil {
			maps.Copy(rs, got)
		}
	})
	if err != nil {
		return err
	}
	var failed error
	list := []deletedGroupJSON{}
	for _, id := range ids {
		err := answerErr(rs, id, func(r kadm.DeleteGroupResponse) (string, error) { return r.ErrMessage, r.Err })
		if err != nil {
			failed = errors.Join(failed, fmt.Errorf("delete %s: %w", id, err))
		}
		list = append(list, deletedGroupJSON{Group: id, Deleted: err == nil, Error: errText(err)})
	}
	if f.o.json() {
		return errors.Join(writeJSON(e.stdout, map[string]any{"groups": list}), failed)
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "GROUP\tRESULT")
	for _, g := range list {
		res := "deleted"
		if g.Error != nil {
			res = "error: " + *g.Error
		}
		fmt.Fprintf(tw, "%s\t%s\n", cell(g.Group), cell(res))
	}
	return errors.Join(tw.Flush(), failed)
}

// groupDeleteRow is one group of "group delete --dry-run": its state, its
// member and offset counts, and why it cannot be deleted (nil: it can).
type groupDeleteRow struct {
	group            string
	state            string
	members, offsets *int32
	err              error
}

// previewGroupDelete describes the groups ids for a dry run of their
// deletion, and counts those that can be deleted: those without members,
// as the server deletes only those.
func previewGroupDelete(ctx context.Context, cl *kgo.Client, ids []string) ([]groupDeleteRow, int, error) {
	byID, errs := describeEach(ctx, cl, ids)
	fetched := fetchManyOffsets(ctx, kadm.NewClient(cl), ids)
	var rows []groupDeleteRow
	n := 0
	for _, id := range ids {
		r := groupDeleteRow{group: id}
		g, ok := byID[id]
		switch {
		case !ok:
			r.err = describeErr(errs, id)
		case g.MemberCount > 0:
			r.state, r.members = g.State, ptr(int32(g.MemberCount))
			// Worded as the node's refusal of the delete itself (group/admin.go), so the preview reads as the
			// answer would: "NON_EMPTY_GROUP: group "g" is Stable with 2 members: ...".
			r.err = withMessage(kerr.NonEmptyGroup, fmt.Sprintf("group %q is %s with %s: only a group without members can be deleted",
				id, g.State, plural(g.MemberCount, "member")))
		default:
			r.state, r.members = g.State, ptr(int32(0))
			n++
		}
		if f, ok := fetched[id]; ok && f.Err == nil {
			c := int32(0)
			f.Fetched.Each(func(o kadm.OffsetResponse) {
				if o.Err == nil && o.At >= 0 {
					c++
				}
			})
			r.offsets = &c
		}
		rows = append(rows, r)
	}
	return rows, n, nil
}

// distinctIDs returns ids without repeats, in the order first named.
func distinctIDs(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	uniq := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	return uniq
}

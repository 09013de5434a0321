package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// resetJSON is the result of "offsets reset".
type resetJSON struct {
	Group string `json:"group"`
	Mode  string `json:"mode"`
	// Executed is true with --execute (the plan was committed), false for
	// a dry run.
	Executed bool `json:"executed"`
	// ClampedToLog is true when the new offsets were checked against the
	// data cluster's log (--data-bootstrap), false when they were not.
	ClampedToLog bool      `json:"clamped_to_log"`
	Partitions   []planRow `json:"partitions"`
}

// deletedOffsetJSON is one partition of "offsets delete".
type deletedOffsetJSON struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Deleted   bool    `json:"deleted"`
	Error     *string `json:"error"`
}

// topicFlag is the repeatable --topic T[:P,...].
type topicFlag struct {
	topics []string           // in the order given
	parts  map[string][]int32 // nil entry: every partition
}

func (t *topicFlag) Set(s string) error {
	topic, ps, err := parseTopicSpec(s)
	if err != nil {
		return err
	}
	if t.parts == nil {
		t.parts = map[string][]int32{}
	}
	cur, seen := t.parts[topic]
	switch {
	case !seen:
		t.topics = append(t.topics, topic)
		t.parts[topic] = ps
	case cur == nil || ps == nil:
		t.parts[topic] = nil // the whole topic wins over some of its partitions
	default:
		for _, p := range ps {
			if !slices.Contains(cur, p) {
				cur = append(cur, p)
			}
		}
		t.parts[topic] = cur
	}
	return nil
}

func (t *topicFlag) String() string { return strings.Join(t.topics, ",") }

// The usage of each "cohort offsets" action.
var offsetsUsages = map[string]string{
	"show": `usage: cohort offsets [show] ID... [--data-bootstrap HOST:PORT]
  committed offsets; with --data-bootstrap, log start, log end and lag per
  partition and in total ("show" is needed for a group named show, reset or
  delete)
`,
	"reset": `usage: cohort offsets reset ID (--topic T[:P,...]... | --all-topics | --from-file CSV)
                          (--to-offset N | --shift-by N | --to-earliest | --to-latest |
                           --to-datetime T | --by-duration D | --from-file CSV)
                          [--data-bootstrap HOST:PORT] [--dry-run | --execute]
  plans (--dry-run, the default) or commits (--execute) new offsets for a
  group without members; with --data-bootstrap the new offsets are clamped to
  [log start, log end]
`,
	"delete": `usage: cohort offsets delete ID --topic T[:P,...]...
  deletes committed offsets (OffsetDelete)
`,
}

// offsetsFlags are the flags of one offsets command.
type offsetsFlags struct {
	*cmdFlags
	topics                           topicFlag
	allTopics, execute               bool
	toOffset, shiftBy                int64
	toDatetime, byDuration, fromFile string
}

// offsetsFamily is "cohort offsets [show]|reset|delete".
var offsetsFamily = family[*offsetsFlags]{
	name:     "offsets",
	actions:  []string{"show", "reset", "delete"},
	implicit: "show",
	usage: `usage:
  cohort offsets [show] ID...                committed offsets and lag
  cohort offsets reset ID ...                plan (default) or --execute an offset reset
  cohort offsets delete ID --topic T[:P,...] delete committed offsets (OffsetDelete)
  (cohort offsets ACTION -h: the action's flags)
`,
	build: func(e env, action string) (*flag.FlagSet, *offsetsFlags) {
		f := &offsetsFlags{cmdFlags: newCmdFlags(e, "offsets "+action, offsetsUsages[action])}
		fs, all := f.fs, action == anyAction
		if all || action == "show" || action == "reset" {
			f.d.register(fs)
		}
		if all || action == "reset" || action == "delete" {
			fs.Var(&f.topics, "topic", "`TOPIC[:PARTITION,...]` (repeatable; without partitions: all of them)")
			limitKafkaStrings(fs, map[string]func(string) []string{"topic": func(s string) []string {
				topic, _, _ := strings.Cut(s, ":") // as parseTopicSpec splits it
				return []string{topic}
			}})
		}
		if all || action == "reset" {
			fs.BoolVar(&f.allTopics, "all-topics", false, "every topic the group has committed offsets for")
			fs.Int64Var(&f.toOffset, modeToOffset, 0, "reset to this `offset`")
			fs.Int64Var(&f.shiftBy, modeShiftBy, 0, "reset to the committed offset plus `N` (negative: back)")
			fs.Bool(modeToEarliest, false, "reset to the log start (needs --data-bootstrap)")
			fs.Bool(modeToLatest, false, "reset to the log end (needs --data-bootstrap)")
			fs.StringVar(&f.toDatetime, modeToDatetime, "", "reset to the first offset at or after `time` YYYY-MM-DDTHH:MM:SS[.sss][Z|±HH:MM] (UTC without a zone; needs --data-bootstrap)")
			fs.StringVar(&f.byDuration, modeByDuration, "", "reset to the first offset at or after now minus `duration` (90m, PT1H30M, P1D; needs --data-bootstrap)")
			fs.StringVar(&f.fromFile, modeFromFile, "", "reset to the offsets of a CSV `file` of topic,partition,offset lines")
			fs.Bool("dry-run", false, "print the plan only (the default)")
			fs.BoolVar(&f.execute, "execute", false, "commit the plan")
		}
		return fs, f
	},
}

// offsetsCmd runs "cohort offsets [show] ID...", "cohort offsets reset ID"
// and "cohort offsets delete ID".
func offsetsCmd(e env, args []string) error {
	action, pos, f, err := offsetsFamily.parse(e, args)
	if err != nil {
		return err
	}
	if action == "" {
		return usagef("offsets: want a group id")
	}
	if err := f.check(); err != nil {
		return err
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	topics := &f.topics
	switch action {
	case "show":
		if len(pos) == 0 {
			return usagef("offsets: want a group id")
		}
		return describeCmd(e, f.cmdFlags, describeFlags{offsets: true, verbose: true}, pos)
	case "delete":
		if len(pos) != 1 {
			return usagef("offsets delete: want one group id, got %d arguments", len(pos))
		}
		if len(topics.topics) == 0 {
			return usagef("offsets delete: want --topic T[:P,...]")
		}
		return deleteOffsets(e, f.cmdFlags, pos[0], topics)
	}
	// reset
	if len(pos) != 1 {
		return usagef("offsets reset: want one group id, got %d arguments", len(pos))
	}
	var modes []string
	for _, m := range resetModes {
		if set[m] {
			modes = append(modes, "--"+m)
		}
	}
	const modeList = "--to-offset N, --shift-by N, --to-earliest, --to-latest, --to-datetime T, --by-duration D or --from-file CSV"
	switch {
	case len(modes) == 0:
		return usagef("offsets reset: say what offset to reset to: give one of %s", modeList)
	case len(modes) > 1:
		return usagef("offsets reset: %s exclude each other: give one of %s", strings.Join(modes, " and "), modeList)
	}
	mode := resetMode{name: strings.TrimPrefix(modes[0], "--"), offset: f.toOffset, shift: f.shiftBy}
	execute := &f.execute
	if set["dry-run"] && *execute {
		return usagef("offsets reset: --dry-run and --execute exclude each other")
	}
	scopes := 0
	if len(topics.topics) > 0 {
		scopes++
	}
	if f.allTopics {
		scopes++
	}
	if mode.name == modeFromFile {
		if scopes > 0 {
			return usagef("offsets reset: --from-file names its partitions: drop --topic/--all-topics")
		}
	} else if scopes != 1 {
		return usagef("offsets reset: want --topic T[:P,...] or --all-topics (one of them)")
	}
	if needsLog(mode.name) && f.d.bootstrap == "" {
		return usagef("offsets reset: --%s needs --data-bootstrap, the Kafka cluster that holds the records", mode.name)
	}
	toDatetime, byDuration, fromFile := &f.toDatetime, &f.byDuration, &f.fromFile
	switch mode.name {
	case modeToOffset:
		if mode.offset < 0 {
			return usagef("--to-offset %d: want 0 or more", mode.offset)
		}
	case modeToDatetime:
		if mode.at, err = parseDatetime(*toDatetime); err != nil {
			return err
		}
	case modeByDuration:
		dur, err := parseDuration(*byDuration)
		if err != nil {
			return err
		}
		mode.at = e.clock.Now().Add(-dur)
	case modeFromFile:
		if mode.file, err = readResetFile(*fromFile); err != nil {
			return err
		}
	}
	return resetOffsets(e, f.cmdFlags, pos[0], mode, topics, *execute)
}

// resetOffsets plans (and with execute commits) the reset of group's offsets.
func resetOffsets(e env, f *cmdFlags, id string, mode resetMode, topics *topicFlag, execute bool) error {
	cl, ctx, done, err := f.c.open()
	if err != nil {
		return err
	}
	defer done()
	adm := kadm.NewClient(cl)
	data, err := f.d.open(ctx)
	if err != nil {
		return err
	}
	if err := checkInactive(ctx, cl, id); err != nil {
		return err
	}
	fetched, err := untilReachable(ctx, cl, func() (kadm.OffsetResponses, error) { return adm.FetchOffsets(ctx, id) })
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return fmt.Errorf("offsets of %s: %w", id, err)
	}
	committed := map[tp]int64{}
	fetched.Each(func(r kadm.OffsetResponse) { committed[tp{r.Topic, r.Partition}] = r.At })

	var scope []tp
	switch {
	case mode.name == modeFromFile:
		scope = slices.Collect(maps.Keys(mode.file))
	case len(topics.topics) == 0: // --all-topics
		if len(committed) == 0 {
			return fmt.Errorf("reset %s: the group has no committed offsets, so --all-topics names nothing: use --topic", id)
		}
		scope = slices.Collect(maps.Keys(committed))
	default:
		// A topic without partitions: all of its partitions, as the
		// data cluster has them, or cohort's catalog without one; a
		// topic only the data cluster has, without it: the partitions
		// the group has offsets of (the reset moves them, as
		// --all-topics does; unvouchedTopics explains a name with none).
		src := adm
		if data != nil {
			src = data
		}
		for _, t := range topics.topics {
			ps := topics.parts[t]
			if ps == nil {
				if ps, err = partitionsOf(ctx, src, t); err != nil {
					if data != nil || !errors.Is(err, errNoTopic) {
						return fmt.Errorf("reset %s: %w", id, err)
					}
					for k := range committed {
						if k.topic == t {
							ps = append(ps, k.partition)
						}
					}
					if len(ps) == 0 {
						return fmt.Errorf("reset %s: %w", id, noTopicToMove(kerr.UnknownTopicOrPartition, t))
					}
					slices.Sort(ps)
				}
			}
			for _, p := range ps {
				scope = append(scope, tp{t, p})
			}
		}
	}
	var atTime map[tp]int64
	var ranges map[tp]logRange
	if data != nil {
		names := map[string]bool{}
		for _, k := range scope {
			names[k.topic] = true
		}
		topicList := slices.Sorted(maps.Keys(names))
		if ranges, err = logOffsets(ctx, data, topicList, e.stderr); err != nil {
			return err
		}
		if ranges == nil {
			ranges = map[tp]logRange{}
		}
		if !mode.at.IsZero() {
			after, err := data.ListOffsetsAfterMilli(ctx, mode.at.UnixMilli(), topicList...)
			if err != nil {
				return fmt.Errorf("data cluster: offsets at %s: %w", mode.at.Format("2006-01-02T15:04:05.000Z07:00"), err)
			}
			atTime = map[tp]int64{}
			after.Each(func(lo kadm.ListedOffset) {
				if lo.Err == nil && lo.Offset >= 0 {
					atTime[tp{lo.Topic, lo.Partition}] = lo.Offset
				}
			})
		}
	}
	res := resetJSON{Group: id, Mode: mode.name, ClampedToLog: data != nil,
		Partitions: planReset(mode, scope, committed, ranges, atTime)}
	if err := unvouchedTopics(ctx, cl, id, res.Partitions, committed); err != nil {
		return err
	}
	var failed error
	if execute {
		failed = commitPlan(ctx, cl, id, res.Partitions)
		res.Executed = true
	}
	if f.o.json() {
		return errors.Join(writeJSON(e.stdout, res), failed)
	}
	return errors.Join(writePlan(e.stdout, res), failed)
}

// checkInactive refuses a reset of a group that has members: as Kafka's
// tool does, offsets are only reset while no consumer of the group could
// commit over them. A group that does not exist is fine (the reset
// creates its offsets). Classic and consumer groups alike (describeGroups).
func checkInactive(ctx context.Context, cl *kgo.Client, id string) error {
	descs, err := describeGroups(ctx, cl, []string{id})
	switch {
	case errors.Is(err, kerr.GroupIDNotFound) || errors.Is(err, errNoGroup):
		return nil
	case err != nil:
		return err
	case len(descs) != 1:
		return fmt.Errorf("describe %s: %d groups in the answer", id, len(descs))
	}
	g := descs[0]
	if g.MemberCount == 0 {
		return nil
	}
	return fmt.Errorf("reset %s: the %s group is %s with %s; offsets can only be reset while it has none (stop its consumers first)",
		id, g.Type, g.State, plural(g.MemberCount, "member"))
}

// noTopicToMove is err (UNKNOWN_TOPIC_OR_PARTITION) explained: a reset of a
// topic neither cohort's catalog nor the group's offsets know.
func noTopicToMove(err error, topic string) error {
	return withMessage(err, fmt.Sprintf("cohort has no topic %s and the group has no offset of it to move (to reset a topic only the data cluster has, give --data-bootstrap)", topic))
}

// unvouchedTopics refuses a plan that would commit an offset of a topic
// cohort's catalog lacks when nothing vouches for the topic: cohort keeps the
// offsets consumers commit for topics that only the data cluster has, so a
// reset may set them, but only where the data cluster's log was consulted
// for the partition (its row has a log end) or the group already has an
// offset of the partition (the reset moves it). Anything else is what a
// mistyped name looks like. It also refuses a partition that a catalog topic
// does not have, which cohort would refuse at the commit, as
// kafka-consumer-groups checks every partition before it resets any. It runs
// before the plan is shown, so a dry run and --execute refuse alike, and
// nothing is committed.
func unvouchedTopics(ctx context.Context, cl *kgo.Client, id string, rows []planRow, committed map[tp]int64) error {
	names := map[string]bool{} // every topic the plan commits to; true: nothing vouches for it
	for _, r := range rows {
		if r.NewOffset == nil {
			continue
		}
		_, had := committed[tp{r.Topic, r.Partition}]
		names[r.Topic] = names[r.Topic] || r.LogEndOffset == nil && !had
	}
	if len(names) == 0 {
		return nil
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range slices.Sorted(maps.Keys(names)) {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, mt)
	}
	resp, err := untilReachable(ctx, cl, func() (*kmsg.MetadataResponse, error) { return req.RequestWith(ctx, cl) })
	if err != nil {
		return fmt.Errorf("reset %s: topics: %w", id, err)
	}
	var failed error
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case err == nil:
			failed = errors.Join(failed, missingPartitions(id, name, t.Partitions, rows))
		case !names[name]:
			// Vouched for (outside the catalog, or not ours to
			// describe): the commit answers for it.
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			failed = errors.Join(failed, fmt.Errorf("reset %s: %w", id, noTopicToMove(err, name)))
		default:
			failed = errors.Join(failed, fmt.Errorf("reset %s: topic %s: %w", id, name, err))
		}
	}
	return failed
}

// missingPartitions is the error for the rows of topic, a catalog topic
// whose partitions are have, that would commit to a partition it lacks.
func missingPartitions(id, topic string, have []kmsg.MetadataResponseTopicPartition, rows []planRow) error {
	exists := map[int32]bool{}
	for _, p := range have {
		exists[p.Partition] = true
	}
	var missing []string
	for _, r := range rows {
		if r.Topic == topic && r.NewOffset != nil && !exists[r.Partition] {
			missing = append(missing, strconv.Itoa(int(r.Partition)))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	what := "no partition " + missing[0]
	if len(missing) > 1 {
		what = "no partitions " + strings.Join(missing, ",")
	}
	return fmt.Errorf("reset %s: %w", id, withMessage(kerr.UnknownTopicOrPartition,
		fmt.Sprintf("topic %s has %s (0 to %d): %s", topic, plural(len(have), "partition"), len(have)-1, what)))
}

// commitPlan commits the new offsets of rows as an admin (generation -1, no
// member id) and records each partition's error in its row.
//
// It sends the OffsetCommit itself, naming topics by name: kadm's
// CommitOffsets names them by ID and drops, on the client side, any topic
// cohort's Metadata lacks, although cohort keeps offsets of such topics
// (unvouchedTopics decides which may be reset). Names are enough because
// the CLI's client stays at OffsetCommit v9 (byname.Opt in connect); at
// v10 a topic without its ID would be refused.
func commitPlan(ctx context.Context, cl *kgo.Client, id string, rows []planRow) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = id, -1, ""
	at := map[string]int{} // topic -> index in req.Topics
	for _, r := range rows {
		if r.NewOffset == nil {
			continue
		}
		i, ok := at[r.Topic]
		if !ok {
			i = len(req.Topics)
			at[r.Topic] = i
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = r.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = r.Partition, *r.NewOffset, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	if len(req.Topics) == 0 {
		return fmt.Errorf("reset %s: %w", id, errNothingToReset)
	}
	resp, err := untilReachable(ctx, cl, func() (*kmsg.OffsetCommitResponse, error) { return req.RequestWith(ctx, cl) })
	if err != nil {
		return fmt.Errorf("reset %s: commit: %w", id, err)
	}
	codes := map[tp]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[tp{rt.Topic, rp.Partition}] = rp.ErrorCode
		}
	}
	var failed error
	for i := range rows {
		r := &rows[i]
		if r.NewOffset == nil {
			continue
		}
		code, ok := codes[tp{r.Topic, r.Partition}]
		err := kerr.ErrorForCode(code)
		if !ok {
			err = errors.New("no answer for the partition")
		}
		if err != nil {
			r.Error = errText(err)
			failed = errors.Join(failed, fmt.Errorf("reset %s: %s partition %d: %w", id, r.Topic, r.Partition, err))
		}
	}
	return failed
}

// writePlan prints a reset plan and what became of it.
func writePlan(w io.Writer, res resetJSON) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET\tLOG-START-OFFSET\tLOG-END-OFFSET\tNOTE")
	for _, r := range res.Partitions {
		note := r.Note
		if r.Error != nil {
			note = strings.TrimPrefix(note+"; ", "; ") + "error: " + *r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", cell(res.Group), cell(r.Topic), r.Partition, orDash(r.CurrentOffset),
			orDash(r.NewOffset), orDash(r.LogStartOffset), orDash(r.LogEndOffset), cell(strOrDash(note)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.ClampedToLog {
		fmt.Fprintln(w, "new offsets are clamped to the data cluster's [log start, log end]")
	} else {
		fmt.Fprintln(w, "new offsets are not checked against the log (no --data-bootstrap)")
	}
	if res.Executed {
		n := 0
		for _, r := range res.Partitions {
			if r.NewOffset != nil && r.Error == nil {
				n++
			}
		}
		fmt.Fprintf(w, "committed %d offsets of group %s\n", n, cell(res.Group))
	} else {
		fmt.Fprintln(w, "dry run: nothing committed; run again with --execute to commit this plan")
	}
	return nil
}

// deleteOffsets deletes the committed offsets topics names (a topic without
// partitions: every partition the group has an offset for).
func deleteOffsets(e env, f *cmdFlags, id string, topics *topicFlag) error {
	cl, ctx, done, err := f.c.open()
	if err != nil {
		return err
	}
	defer done()
	adm := kadm.NewClient(cl)
	set := kadm.TopicsSet{}
	var whole []string
	for _, t := range topics.topics {
		if ps := topics.parts[t]; ps != nil {
			set.Add(t, ps...)
		} else {
			whole = append(whole, t)
		}
	}
	if len(whole) > 0 {
		// Every committed offset of the group, not only those of topics
		// the catalog knows: offsets outlive a deleted topic, and are
		// deleted the same way.
		fetched, err := untilReachable(ctx, cl, func() (kadm.OffsetResponses, error) { return adm.FetchOffsets(ctx, id) })
		if err != nil {
			return fmt.Errorf("offsets of %s: %w", id, err)
		}
		for _, t := range whole {
			n := 0
			for p, r := range fetched[t] {
				if r.Err != nil { // only the named topics' errors count
					return fmt.Errorf("offsets of %s: %s partition %d: %w", id, t, p, r.Err)
				}
				if r.At >= 0 {
					set.Add(t, p)
					n++
				}
			}
			if n == 0 {
				return fmt.Errorf("delete offsets of %s: the group has no committed offsets for topic %s", id, t)
			}
		}
	}
	rs, err := untilReachable(ctx, cl, func() (kadm.DeleteOffsetsResponses, error) { return adm.DeleteOffsets(ctx, id, set) })
	if err != nil {
		return fmt.Errorf("delete offsets of %s: %w", id, err)
	}
	var failed error
	list := []deletedOffsetJSON{}
	for _, t := range set.Sorted() {
		for _, p := range t.Partitions {
			err, ok := rs.Lookup(t.Topic, p)
			if !ok {
				err = errors.New("no answer for the partition")
			}
			if err != nil {
				failed = errors.Join(failed, fmt.Errorf("delete offsets of %s: %s partition %d: %w", id, t.Topic, p, err))
			}
			list = append(list, deletedOffsetJSON{Topic: t.Topic, Partition: p, Deleted: err == nil, Error: errText(err)})
		}
	}
	if f.o.json() {
		return errors.Join(writeJSON(e.stdout, map[string]any{"group": id, "partitions": list}), failed)
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tRESULT")
	for _, r := range list {
		res := "deleted"
		if r.Error != nil {
			res = "error: " + *r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", cell(id), cell(r.Topic), r.Partition, cell(res))
	}
	return errors.Join(tw.Flush(), failed)
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicJSON is one topic of "topics" and the result of "topic create" and
// "topic grow": its name and partition count (after the change).
type topicJSON struct {
	Topic              string `json:"topic"`
	Partitions         int    `json:"partitions"`
	PreviousPartitions *int   `json:"previous_partitions,omitempty"` // grow only
}

// deletedTopicJSON is the result of "topic delete": DeleteTopics does not
// say how many partitions the topic had, so there is no count.
type deletedTopicJSON struct {
	Topic   string `json:"topic"`
	Deleted bool   `json:"deleted"`
}

// The usage of "cohort topics" and of each "cohort topic" action.
var topicUsages = map[string]string{
	"topics": `usage: cohort topics
  lists the topic catalog: each topic and its partition count
`,
	"create": `usage: cohort topic create NAME [--partitions N]
  adds topic NAME to the catalog with N partitions (default 1)
`,
	"grow": `usage: cohort topic grow NAME --partitions N
  raises NAME's partition count to N (it can only grow)
`,
	"delete": `usage: cohort topic delete NAME [--dry-run | --yes]
  deletes topic NAME from the catalog, and every group's committed offsets of
  it; --dry-run shows the topic and the groups that have offsets of it and
  deletes nothing; on a terminal it shows them and asks first, unless --yes
`,
}

// topicFamily is "cohort topic create|grow|delete NAME".
var topicFamily = family[*topicFlags]{
	name:    "topic",
	actions: []string{"create", "grow", "delete"},
	usage: `usage:
  cohort topic create NAME [--partitions N]
  cohort topic grow NAME --partitions N   raise the partition count to N (it can only grow)
  cohort topic delete NAME [--dry-run | --yes]
  (cohort topics lists them; cohort topic ACTION -h: the action's flags)
`,
	build: func(e env, action string) (*flag.FlagSet, *topicFlags) {
		f := &topicFlags{cmdFlags: newCmdFlags(e, "topic "+action, topicUsages[action])}
		switch action {
		case "create", "grow", anyAction:
			f.fs.IntVar(&f.partitions, "partitions", 1, "partitions of the new topic (create), or the new, larger total (grow)")
		}
		if action == "delete" || action == anyAction {
			f.del.register(f.fs)
		}
		return f.fs, f
	},
}

// topicFlags are the flags of one topic command.
type topicFlags struct {
	*cmdFlags
	partitions int
	del        deleteFlags
}

// topicsCmd runs "cohort topics" and "cohort topic create|grow|delete NAME"
// against cohort's topic catalog.
func topicsCmd(e env, cmd string, args []string) error {
	var f *topicFlags
	action, name := "", ""
	if cmd == "topics" {
		f = &topicFlags{cmdFlags: newCmdFlags(e, cmd, topicUsages[cmd])}
		if err := f.parseNoArgs(args); err != nil {
			return err
		}
	} else {
		var pos []string
		var err error
		action, pos, f, err = topicFamily.parse(e, args)
		if err != nil {
			return err
		}
		if action == "" {
			if len(pos) > 0 {
				return usagef("topic: unknown action %q: want create, grow or delete", pos[0])
			}
			return usagef("topic: want create|grow|delete NAME")
		}
		if err := f.check(); err != nil {
			return err
		}
		if len(pos) != 1 || pos[0] == "" {
			return usagef("topic %s: want one topic NAME", action)
		}
		name = pos[0]
		if err := f.del.check("topic delete"); err != nil {
			return err
		}
		// Checked before the int32 the request carries: a larger value
		// would wrap (4294967298 asked for 2 partitions).
		if action != "delete" && (f.partitions < 1 || f.partitions > math.MaxInt32) {
			return usagef("--partitions %d: want 1 to %d", f.partitions, math.MaxInt32)
		}
	}
	c, o, partitions := &f.c, &f.o, &f.partitions
	cl, ctx, done, err := c.open()
	if err != nil {
		return err
	}
	defer done()
	adm := kadm.NewClient(cl)
	var res any
	switch action {
	case "":
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return c.fail("topics", err)
		}
		list := []topicJSON{}
		for _, t := range topics.Sorted() {
			list = append(list, topicJSON{Topic: t.Topic, Partitions: len(t.Partitions)})
		}
		if o.json() {
			return writeJSON(e.stdout, map[string]any{"topics": list})
		}
		tw := newTable(e.stdout)
		fmt.Fprintln(tw, "TOPIC\tPARTITIONS")
		for _, t := range list {
			fmt.Fprintf(tw, "%s\t%d\n", cell(t.Topic), t.Partitions)
		}
		return tw.Flush()
	case "create":
		r, err := adm.CreateTopic(ctx, int32(*partitions), -1, nil, name)
		if r.Err != nil {
			// CreateTopic returns the topic's error as err too: r.Err
			// set means err is it, and the server's message goes with it.
			err = withMessage(r.Err, r.ErrMessage)
		}
		if err != nil {
			return c.fail("create "+name, err)
		}
		res = topicJSON{Topic: name, Partitions: *partitions}
		if !o.json() {
			fmt.Fprintf(e.stdout, "created %s with %s\n", cell(name), plural(int(*partitions), "partition"))
		}
	case "grow":
		// The count only grows: say so with the current count, before
		// asking (Kafka's code for a refused count reads "below 1").
		cur, err := partitionCount(ctx, adm, name)
		if err != nil {
			return c.fail("grow "+name, err)
		}
		if *partitions <= cur {
			return fmt.Errorf("grow %s: it has %d partitions and the count can only grow: give --partitions above %d", name, cur, cur)
		}
		rs, err := adm.UpdatePartitions(ctx, *partitions, name)
		if err == nil {
			err = answerErr(rs, name, func(r kadm.CreatePartitionsResponse) (string, error) { return r.ErrMessage, r.Err })
		}
		if err != nil {
			return c.fail("grow "+name, err)
		}
		res = topicJSON{Topic: name, Partitions: *partitions, PreviousPartitions: ptr(cur)}
		if !o.json() {
			fmt.Fprintf(e.stdout, "%s now has %d partitions (was %d)\n", cell(name), *partitions, cur)
		}
	case "delete":
		preview := func(w io.Writer, asJSON bool) (int, error) {
			p, err := previewTopicDelete(ctx, cl, adm, name)
			if err != nil {
				return 0, c.fail("delete "+name, err)
			}
			if asJSON {
				return 1, writeJSON(w, p)
			}
			offsets := "no group has committed offsets of it"
			if len(p.Groups) > 0 {
				quoted := make([]string, len(p.Groups))
				for i, g := range p.Groups {
					quoted[i] = cell(g)
				}
				offsets = fmt.Sprintf("with it the committed offsets of %s: %s", plural(len(p.Groups), "group"), strings.Join(quoted, ", "))
			}
			fmt.Fprintf(w, "to delete: topic %s (%s); %s\n", cell(name), plural(p.Partitions, "partition"), offsets)
			return 1, nil
		}
		ok, err := f.del.gate(e, "topic delete", "delete topic "+cell(name)+"?", o.json(), preview)
		if !ok || err != nil {
			return err
		}
		rs, err := adm.DeleteTopics(ctx, name)
		if err == nil {
			err = answerErr(rs, name, func(r kadm.DeleteTopicResponse) (string, error) { return r.ErrMessage, r.Err })
		}
		if err != nil {
			return c.fail("delete "+name, err)
		}
		res = deletedTopicJSON{Topic: name, Deleted: true}
		if !o.json() {
			fmt.Fprintf(e.stdout, "deleted %s\n", cell(name))
		}
	}
	if o.json() {
		return writeJSON(e.stdout, res)
	}
	return nil
}

// topicDeletePreview is what "topic delete --dry-run" shows: the topic,
// its partition count, and the groups whose committed offsets of it the
// delete would delete too.
type topicDeletePreview struct {
	Topic      string   `json:"topic"`
	Partitions int      `json:"partitions"`
	Groups     []string `json:"groups_with_offsets"`
	Deleted    bool     `json:"deleted"` // false: a dry run
}

// previewTopicDelete finds what deleting topic would delete: an error
// when cohort has no such topic, as the delete would fail. Each group is
// asked for its offsets of that topic's partitions alone (groupBatch groups
// per OffsetFetch), so the answers hold one topic of each group, not every
// offset of every group.
func previewTopicDelete(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string) (topicDeletePreview, error) {
	p := topicDeletePreview{Topic: topic, Groups: []string{}}
	parts, err := partitionsOf(ctx, adm, topic)
	if errors.Is(err, errNoTopic) {
		err = kerr.UnknownTopicOrPartition
	}
	if err != nil {
		return p, err
	}
	p.Partitions = len(parts)
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return p, err
	}
	holding, errs := groupsWithOffsetsOf(ctx, cl, groups.Groups(), topic, parts)
	if len(errs) > 0 {
		id := slices.Min(slices.Collect(maps.Keys(errs))) // the first failed group, by id
		return p, fmt.Errorf("offsets of group %s: %w", id, errs[id])
	}
	slices.Sort(holding)
	p.Groups = append(p.Groups, holding...)
	return p, nil
}

// groupsWithOffsetsOf returns the groups of ids holding a committed offset
// of one of topic's partitions parts, and the errors of the groups whose
// offsets could not be read. An offset of -1 is no commit: it is what the
// coordinator answers for a partition the group has no offset of.
func groupsWithOffsetsOf(ctx context.Context, cl *kgo.Client, ids []string, topic string, parts []int32) (holding []string, errs map[string]error) {
	errs = map[string]error{}
	inBatches(ids, func(batch []string) {
		req := kmsg.NewPtrOffsetFetchRequest()
		for _, id := range batch {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = id
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = topic, parts
			rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
			req.Groups = append(req.Groups, rg)
		}
		for _, sh := range cl.RequestSharded(ctx, req) {
			err := sh.Err
			if err == nil {
				err = kerr.ErrorForCode(sh.Resp.(*kmsg.OffsetFetchResponse).ErrorCode)
			}
			if err != nil { // the whole shard failed: each of its groups
				for _, rg := range sh.Req.(*kmsg.OffsetFetchRequest).Groups {
					errs[rg.Group] = err
				}
				continue
			}
			for _, rg := range sh.Resp.(*kmsg.OffsetFetchResponse).Groups {
				if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
					errs[rg.Group] = err
					continue
				}
				switch held, err := holdsOffset(rg.Topics, topic); {
				case err != nil:
					errs[rg.Group] = err
				case held:
					holding = append(holding, rg.Group)
				}
			}
		}
	})
	return holding, errs
}

// holdsOffset reports whether one of topics' partitions of topic has a
// committed offset, or the error of a partition the answer has none for.
func holdsOffset(topics []kmsg.OffsetFetchResponseGroupTopic, topic string) (bool, error) {
	held := false
	for _, t := range topics {
		if t.Topic != topic {
			continue
		}
		for _, pt := range t.Partitions {
			if err := kerr.ErrorForCode(pt.ErrorCode); err != nil {
				return false, fmt.Errorf("%s/%d: %w", topic, pt.Partition, err)
			}
			held = held || pt.Offset != -1
		}
	}
	return held, nil
}

// partitionCount is the number of partitions of topic, as adm's cluster
// answers Metadata; an error if it has no such topic.
func partitionCount(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	ps, err := partitionsOf(ctx, adm, topic)
	return len(ps), err
}

// errNoTopic: the cluster asked has no such topic.
var errNoTopic = errors.New("no topic")

// partitionsOf lists topic's partitions on adm's cluster.
func partitionsOf(ctx context.Context, adm *kadm.Client, topic string) ([]int32, error) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := tds[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("%w %s", errNoTopic, topic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, td.Err)
	}
	ps := make([]int32, 0, len(td.Partitions))
	for _, p := range td.Partitions.Sorted() {
		ps = append(ps, p.Partition)
	}
	return ps, nil
}

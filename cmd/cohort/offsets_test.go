package main

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/clock"
)

// TestOffsetsReset: every reset mode, as a dry run (nothing changes) and
// executed (the committed offsets become the plan's), clamped to the kfake
// data cluster's log; the modes that work without a data cluster; the
// refusal for a group with members; the usage errors.
func TestOffsetsReset(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	data := startData(t, 3, "events", "elsewhere")
	base := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}, clock: clock.NewFake(base.Add(106 * time.Second))}
	c.ok("topic", "create", "events", "--partitions", "3")

	// p0: offsets 0-9 stamped base+0s..9s, then 0 and 1 deleted (log
	// start 2); p1: 0-4 stamped base+100s..104s; p2: empty.
	data.produce(t, "events", 0, 10, base)
	data.produce(t, "events", 1, 5, base.Add(100*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "events", Partition: 0, At: 2})
	if rs, err := data.adm.DeleteRecords(ctx, del); err != nil || rs.Error() != nil {
		t.Fatal(err, rs.Error())
	}

	const grp = "r"
	commit(t, n.Addr(), grp, "events", map[int32]int64{0: 6, 1: 1})
	withData := []string{"--data-bootstrap", data.addr}

	// reset runs a reset as JSON, checks the plan's new offsets (-1: left
	// unchanged) and then what is committed: the plan's offsets when
	// executed, the offsets before otherwise.
	reset := func(want map[int32]int64, args ...string) resetJSON {
		t.Helper()
		before := committed(t, n.Addr(), grp, "events")
		var res resetJSON
		c.jsonOf(&res, append([]string{"offsets", "reset", grp}, args...)...)
		executed := strings.Contains(strings.Join(args, " "), "--execute")
		if res.Group != grp || res.Executed != executed || len(res.Partitions) != len(want) {
			t.Fatalf("%q: %+v", args, res)
		}
		after := committed(t, n.Addr(), grp, "events")
		for _, r := range res.Partitions {
			w, ok := want[r.Partition]
			if !ok || r.Topic != "events" || r.Error != nil {
				t.Fatalf("%q: unexpected row %+v", args, r)
			}
			if w < 0 {
				if r.NewOffset != nil || r.Note == "" {
					t.Fatalf("%q: partition %d should stay unchanged with a note: %+v", args, r.Partition, r)
				}
				continue
			}
			if r.NewOffset == nil || *r.NewOffset != w {
				t.Fatalf("%q: partition %d: new offset %s, want %d (%+v)", args, r.Partition, orDash(r.NewOffset), w, r)
			}
			if cur, ok := before[r.Partition]; ok != (r.CurrentOffset != nil) || ok && cur != *r.CurrentOffset {
				t.Fatalf("%q: partition %d: current %s, committed before %v", args, r.Partition, orDash(r.CurrentOffset), before)
			}
			if executed && after[r.Partition] != w {
				t.Fatalf("%q: partition %d: committed %d after --execute, want %d", args, r.Partition, after[r.Partition], w)
			}
		}
		if !executed && len(after) != len(before) {
			t.Fatalf("%q: a dry run changed the offsets: %v -> %v", args, before, after)
		}
		for p, o := range before {
			if !executed && after[p] != o {
				t.Fatalf("%q: a dry run changed the offsets: %v -> %v", args, before, after)
			}
		}
		return res
	}
	// both runs a reset as a dry run, then executed.
	both := func(want map[int32]int64, args ...string) {
		t.Helper()
		reset(want, args...)
		reset(want, append(args, "--execute")...)
	}

	// --to-offset over the committed topics: p0's 1 is below its log
	// start, clamped to 2.
	res := reset(map[int32]int64{0: 2, 1: 1}, append([]string{"--all-topics", "--to-offset", "1"}, withData...)...)
	if !res.ClampedToLog || res.Mode != "to-offset" || res.Partitions[0].Note != "below the log start 2: clamped" ||
		*res.Partitions[0].RequestedOffset != 1 || *res.Partitions[0].LogStartOffset != 2 || *res.Partitions[0].LogEndOffset != 10 {
		t.Fatalf("to-offset plan: %+v", res)
	}
	both(map[int32]int64{0: 2, 1: 1}, append([]string{"--all-topics", "--to-offset", "1"}, withData...)...)
	// --shift-by over the data cluster's partitions of the topic; p2 has
	// nothing committed to shift from.
	both(map[int32]int64{0: 5, 1: 4, 2: -1}, append([]string{"--topic", "events", "--shift-by", "3"}, withData...)...)
	// clamped to the log end.
	both(map[int32]int64{1: 5}, append([]string{"--topic", "events:1", "--shift-by", "10"}, withData...)...)
	both(map[int32]int64{0: 2, 1: 0, 2: 0}, append([]string{"--topic", "events", "--to-earliest"}, withData...)...)
	both(map[int32]int64{0: 10, 1: 5, 2: 0}, append([]string{"--all-topics", "--to-latest"}, withData...)...)
	both(map[int32]int64{0: 4, 1: 0, 2: 0}, append([]string{"--topic", "events", "--to-datetime", "2024-05-01T10:00:04Z"}, withData...)...)
	both(map[int32]int64{0: 5, 1: 0}, append([]string{"--topic", "events:0,1", "--to-datetime", "2024-05-01T12:00:04.500+02:00"}, withData...)...)
	// The fake clock reads base+106s: 100s back is base+6s.
	both(map[int32]int64{0: 6, 1: 0}, append([]string{"--topic", "events:0", "--topic", "events:1", "--by-duration", "100s"}, withData...)...)
	both(map[int32]int64{0: 6}, append([]string{"--topic", "events:0", "--by-duration", "PT1M40S"}, withData...)...)
	csv := writeTemp(t, "plan.csv", "# topic,partition,offset\nevents,0,3\n\nevents, 1, 7\n")
	both(map[int32]int64{0: 3, 1: 5}, append([]string{"--from-file", csv}, withData...)...)

	// Lag afterwards is the data cluster's end minus the new offsets.
	g := c.describeOne(grp, "--offsets", "--data-bootstrap", data.addr)
	ends := data.endOffsets(t, "events")
	if len(g.Offsets) != 3 || *g.Offsets[0].Lag != ends[0]-3 || *g.Offsets[1].Lag != ends[1]-5 || *g.Offsets[2].Lag != ends[2]-0 ||
		*g.TotalLag != ends[0]-3+ends[1]-5+ends[2] {
		t.Fatalf("lag after reset: %+v", g)
	}

	// The table: the plan, whether it was checked against the log, and
	// whether it was committed.
	out := table(c.ok("offsets", "reset", grp, "--topic", "events:0", "--to-offset", "100", "--data-bootstrap", data.addr))
	if out != "GROUP TOPIC PARTITION CURRENT-OFFSET NEW-OFFSET LOG-START-OFFSET LOG-END-OFFSET NOTE\n"+
		"r events 0 3 10 2 10 above the log end 10: clamped\n"+
		"new offsets are clamped to the data cluster's [log start, log end]\n"+
		"dry run: nothing committed; run again with --execute to commit this plan" {
		t.Fatalf("dry-run table:\n%s", out)
	}

	// Without a data cluster: --to-offset, --shift-by and --from-file are
	// not checked against the log; a topic's partitions come from cohort.
	res = reset(map[int32]int64{0: 100, 1: 100, 2: 100}, "--topic", "events", "--to-offset", "100", "--execute")
	if res.ClampedToLog || res.Partitions[0].LogEndOffset != nil {
		t.Fatalf("without --data-bootstrap: %+v", res)
	}
	reset(map[int32]int64{0: 50, 1: 50}, "--topic", "events:0", "--topic", "events:1", "--shift-by", "-50", "--execute")
	if out := table(c.ok("offsets", "reset", grp, "--topic", "events:0", "--shift-by", "-60")); !strings.Contains(out,
		"r events 0 50 0 - - below 0: clamped\nnew offsets are not checked against the log (no --data-bootstrap)\ndry run") {
		t.Fatalf("shift below 0:\n%s", out)
	}
	out = table(c.ok("offsets", "reset", grp, "--from-file", csv, "--execute"))
	if !strings.HasSuffix(out, "committed 2 offsets of group r") {
		t.Fatalf("from-file --execute:\n%s", out)
	}
	if got := committed(t, n.Addr(), grp, "events"); got[0] != 3 || got[1] != 7 {
		t.Fatalf("from-file without data: %v", got)
	}
	// A group that does not exist yet gets its offsets, as with Kafka.
	var fresh resetJSON
	c.jsonOf(&fresh, "offsets", "reset", "fresh", "--topic", "events:2", "--to-offset", "1", "--execute")
	if got := committed(t, n.Addr(), "fresh", "events"); len(got) != 1 || got[2] != 1 || !fresh.Executed {
		t.Fatalf("fresh group: %v %+v", got, fresh)
	}

	// Errors (exit 1): a topic cohort does not have (a whole topic, or
	// named partitions nothing vouches for: refused before anything is
	// committed, in a dry run too); a partition a catalog topic lacks
	// (the same way); a group with members; --all-topics with nothing
	// committed.
	c.fails(1, []string{"offsets", "reset", grp, "--topic", "nope", "--to-offset", "1"},
		"reset r: UNKNOWN_TOPIC_OR_PARTITION: cohort has no topic nope and the group has no offset of it to move (to reset a topic only the data cluster has, give --data-bootstrap)")
	unvouched := `reset r: UNKNOWN_TOPIC_OR_PARTITION: cohort has no topic elsewhere and the group has no offset of it to move ` +
		`(to reset a topic only the data cluster has, give --data-bootstrap)`
	beforeEvents := committed(t, n.Addr(), grp, "events")
	for _, extra := range [][]string{nil, {"--execute"}} {
		c.fails(1, append([]string{"offsets", "reset", grp, "--topic", "events:0", "--topic", "elsewhere:0", "--to-offset", "2"}, extra...), unvouched)
	}
	if got := committed(t, n.Addr(), grp, "elsewhere"); len(got) != 0 {
		t.Fatalf("a refused reset committed %v", got)
	}
	if got := committed(t, n.Addr(), grp, "events"); got[0] != beforeEvents[0] || got[0] == 2 {
		t.Fatalf("a refused reset committed events/0: %v, before %v", got, beforeEvents)
	}
	// A partition a catalog topic lacks is refused before anything is
	// shown or committed, as kafka-consumer-groups refuses an invalid
	// partition: a dry run does not show a plan that --execute would only
	// half commit (events:0 committed, events:7 refused).
	before := committed(t, n.Addr(), grp, "events")
	noPartition := "reset r: UNKNOWN_TOPIC_OR_PARTITION: topic events has 3 partitions (0 to 2): no partition 7"
	for _, extra := range [][]string{nil, {"--execute"}} {
		if out := c.fails(1, append([]string{"offsets", "reset", grp, "--topic", "events:0,7", "--to-offset", "1"}, extra...), noPartition); out != "" {
			t.Fatalf("a refused reset %q printed a plan:\n%s", extra, out)
		}
	}
	if got := committed(t, n.Addr(), grp, "events"); got[0] != before[0] || got[0] == 1 {
		t.Fatalf("a refused reset committed events/0: %v, before %v", got, before)
	}
	// A topic only the data cluster has (cohort keeps consumers' offsets of
	// such topics): planned against the data cluster's log (p0 holds 5
	// records: 9 is clamped to 5; p1 is empty), committed by name; a
	// partition the data cluster lacks is left as it is.
	data.produce(t, "elsewhere", 0, 5, base)
	var other resetJSON
	c.jsonOf(&other, "offsets", "reset", grp, "--topic", "elsewhere:0,1,9", "--to-offset", "9", "--execute", "--data-bootstrap", data.addr)
	if got := committed(t, n.Addr(), grp, "elsewhere"); len(got) != 2 || got[0] != 5 || got[1] != 0 || !other.Executed {
		t.Fatalf("reset of a topic only the data cluster has: committed %v, plan %+v", got, other)
	}
	if r := other.Partitions[2]; r.Partition != 9 || r.NewOffset != nil || r.Error != nil || r.Note == "" {
		t.Fatalf("partition the data cluster lacks: %+v", r)
	}
	// Once the group has an offset of such a partition, the reset may move
	// it without a data cluster (as --all-topics does); a partition it has
	// none of is still refused.
	c.ok("offsets", "reset", grp, "--topic", "elsewhere:0", "--to-offset", "3", "--execute")
	if got := committed(t, n.Addr(), grp, "elsewhere"); got[0] != 3 {
		t.Fatalf("moving a committed offset of a topic outside the catalog: %v", got)
	}
	c.fails(1, []string{"offsets", "reset", grp, "--topic", "elsewhere:4", "--to-offset", "3"}, unvouched)
	// The whole topic, without partitions: the partitions the group has
	// offsets of (0 and 1), as --all-topics would take them.
	c.ok("offsets", "reset", grp, "--topic", "elsewhere", "--shift-by", "1", "--execute")
	if got := committed(t, n.Addr(), grp, "elsewhere"); len(got) != 2 || got[0] != 4 || got[1] != 1 {
		t.Fatalf("reset of the whole of a topic outside the catalog: committed %v, want 0=4 1=1", got)
	}
	c.fails(1, []string{"offsets", "reset", "nobody", "--all-topics", "--to-offset", "1"}, "no committed offsets")
	consumer(t, n.Addr(), "busy", "events", "busy-app", "")
	c.fails(1, []string{"offsets", "reset", "busy", "--all-topics", "--to-offset", "1"},
		"reset busy: the classic group is Stable with 1 member; offsets can only be reset while it has none")
	c.fails(1, []string{"offsets", "reset", "busy", "--all-topics", "--to-offset", "1", "--execute"}, "offsets can only be reset while it has none")

	// Usage errors (exit 2), found before connecting.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--all-topics", "--to-earliest"}, "--to-earliest needs --data-bootstrap"},
		{[]string{"--all-topics", "--to-latest"}, "--to-latest needs --data-bootstrap"},
		{[]string{"--all-topics", "--to-datetime", "2024-05-01T10:00:00Z"}, "--to-datetime needs --data-bootstrap"},
		{[]string{"--all-topics", "--by-duration", "1h"}, "--by-duration needs --data-bootstrap"},
		{[]string{"--all-topics"}, "offsets reset: say what offset to reset to: give one of --to-offset N, --shift-by N,"},
		{[]string{"--all-topics", "--to-offset", "1", "--shift-by", "1"}, "offsets reset: --to-offset and --shift-by exclude each other"},
		{[]string{"--to-offset", "1"}, "want --topic T[:P,...] or --all-topics"},
		{[]string{"--all-topics", "--topic", "events", "--to-offset", "1"}, "want --topic T[:P,...] or --all-topics"},
		{[]string{"--from-file", csv, "--topic", "events"}, "--from-file names its partitions"},
		{[]string{"--all-topics", "--to-offset", "1", "--dry-run", "--execute"}, "exclude each other"},
		{[]string{"--all-topics", "--to-offset", "-1"}, "--to-offset -1"},
		{[]string{"--all-topics", "--to-datetime", "yesterday", "--data-bootstrap", data.addr}, "--to-datetime \"yesterday\""},
		{[]string{"--all-topics", "--by-duration", "P", "--data-bootstrap", data.addr}, "--by-duration \"P\""},
		{[]string{"--all-topics", "--by-duration", "-1h", "--data-bootstrap", data.addr}, "--by-duration \"-1h\""},
		{[]string{"--from-file", writeTemp(t, "bad.csv", "events,0\n")}, "bad.csv:1: want topic,partition,offset"},
		{[]string{"--from-file", writeTemp(t, "neg.csv", "events,0,-1\n")}, "neg.csv:1"},
		{[]string{"--from-file", writeTemp(t, "dup.csv", "events,0,1\nevents,0,2\n")}, "appears twice"},
		{[]string{"--from-file", writeTemp(t, "empty.csv", "\n")}, "no topic,partition,offset lines"},
		{[]string{"--topic", "events:x", "--to-offset", "1"}, "not a partition number"},
		{[]string{"--topic", ":1", "--to-offset", "1"}, "want TOPIC"},
		{[]string{"--all-topics", "--to-offset", "1", "extra"}, "want one group id, got 2"},
		{[]string{"--all-topics", "--to-offset", "1", "--data-command-config", csv}, "--data-command-config needs --data-bootstrap"},
	} {
		c.fails(2, append([]string{"offsets", "reset", grp}, tc.args...), tc.msg)
	}
	c.fails(2, []string{"offsets", "reset", "--all-topics", "--to-offset", "1"}, "want one group id, got 0")
	c.fails(2, []string{"offsets", "idle", "--to-offset", "1"}, "offsets show: --to-offset is not one of its flags (see cohort offsets show -h)")
	c.fails(2, []string{"offsets", "delete", "idle", "--topic", "events", "--execute"}, "offsets delete: --execute is not one of its flags")
	c.fails(2, []string{"offsets"}, "want a group id")
	// A missing CSV file is an error, not a usage error.
	c.fails(1, []string{"offsets", "reset", grp, "--from-file", "/nonexistent/plan.csv"}, "--from-file")
}

// TestResetPlanNoData: the plan's arithmetic without a data cluster, and
// the partitions it leaves alone.
func TestResetPlanNoData(t *testing.T) {
	scope := []tp{{"b", 0}, {"a", 1}, {"a", 0}}
	rows := planReset(resetMode{name: modeShiftBy, shift: -3}, scope, map[tp]int64{{"a", 0}: 10, {"a", 1}: 2}, nil, nil)
	if len(rows) != 3 || rows[0].Topic != "a" || rows[0].Partition != 0 || *rows[0].NewOffset != 7 ||
		*rows[1].NewOffset != 0 || *rows[1].RequestedOffset != -1 || rows[1].Note != "below 0: clamped" ||
		rows[2].Topic != "b" || rows[2].NewOffset != nil || rows[2].Note == "" {
		t.Fatalf("%+v", rows)
	}
	// A shift past either end of int64 saturates there instead of
	// wrapping: forward it went below 0 (clamped to 0, or to the log
	// start with a data cluster), backward it would go above.
	one := []tp{{"a", 0}}
	at := map[tp]int64{{"a", 0}: 1000}
	logs := map[tp]logRange{{"a", 0}: {5, 3000}}
	for _, c := range []struct {
		shift     int64
		logs      map[tp]logRange
		requested int64
		got       int64
		note      string
	}{
		{9223372036854775000, nil, math.MaxInt64, math.MaxInt64, ""},
		{math.MaxInt64, logs, math.MaxInt64, 3000, "above the log end 3000: clamped"},
		{math.MinInt64, nil, math.MinInt64 + 1000, 0, "below 0: clamped"},
		{math.MinInt64, logs, math.MinInt64 + 1000, 5, "below the log start 5: clamped"},
	} {
		rows := planReset(resetMode{name: modeShiftBy, shift: c.shift}, one, at, c.logs, nil)
		if r := rows[0]; *r.RequestedOffset != c.requested || *r.NewOffset != c.got || r.Note != c.note {
			t.Errorf("shift %d (logs %v): requested %d, new %d, note %q; want %d, %d, %q",
				c.shift, c.logs, *r.RequestedOffset, *r.NewOffset, r.Note, c.requested, c.got, c.note)
		}
	}
	if got := addSaturating(-5, math.MinInt64); got != math.MinInt64 {
		t.Errorf("-5 + MinInt64 = %d", got)
	}
	// A partition the data cluster does not have stays as it is.
	rows = planReset(resetMode{name: modeToOffset, offset: 4}, scope, nil, map[tp]logRange{{"a", 0}: {0, 9}}, nil)
	if *rows[0].NewOffset != 4 || rows[1].NewOffset != nil || rows[1].Note != "not on the data cluster: unchanged" {
		t.Fatalf("%+v", rows)
	}
	if d, err := parseDuration("P1DT2H"); err != nil || d != 26*time.Hour {
		t.Fatal(d, err)
	}
	if d, err := parseDuration("pt1.5s"); err != nil || d != 1500*time.Millisecond {
		t.Fatal(d, err)
	}
	for _, bad := range []string{"", "P", "PT", "1", "P1H", "0s"} {
		if _, err := parseDuration(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}

// TestOffsetsListTopicsOutsideTheCatalog: offsets a group committed by name
// for a topic only the data cluster has (the case --data-bootstrap is for)
// are listed. The CLI fetches them at OffsetFetch v9 (internal/byname): at
// v10, which names topics by ID, cohort leaves such a topic out of an
// all-topics answer.
func TestOffsetsListTopicsOutsideTheCatalog(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "1")
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), byname.Opt())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = "o", -1
	for topic, off := range map[string]int64{"events": 3, "elsewhere": 8} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset, rp.LeaderEpoch = off, -1
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		if code := rt.Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit %s: %v", rt.Topic, kerr.ErrorForCode(code))
		}
	}
	got := map[string]int64{}
	for _, o := range c.describeOne("o", "--offsets").Offsets {
		if o.CurrentOffset != nil {
			got[o.Topic] = *o.CurrentOffset
		}
	}
	if got["events"] != 3 || got["elsewhere"] != 8 {
		t.Errorf("listed offsets %v, want events 3 and elsewhere 8", got)
	}
}

// TestParseDatetimeLikeKafka: --to-datetime reads a time without a zone as
// UTC, as kafka-consumer-groups does (Utils.getDateTime appends a Z), not in
// the local time zone of the machine the command runs on, and takes the zone
// forms Kafka's tool takes (+08:00, +0800, +08). The test runs with a local
// zone two hours east of UTC, where a local reading would be 2 h off.
func TestParseDatetimeLikeKafka(t *testing.T) {
	saved := time.Local
	time.Local = time.FixedZone("UTC+2", 2*3600)
	t.Cleanup(func() { time.Local = saved })
	want := time.Date(2024, 5, 1, 10, 0, 4, 500_000_000, time.UTC)
	for _, s := range []string{"2024-05-01T10:00:04.500", "2024-05-01T10:00:04.500Z", "2024-05-01T12:00:04.500+02:00",
		"2024-05-01T12:00:04.500+0200", "2024-05-01T12:00:04.500+02", "2024-05-01T08:00:04.500-02:00"} {
		got, err := parseDatetime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("--to-datetime %s: %v (%v), want %v", s, got.UTC(), err, want)
		}
	}
	if got, err := parseDatetime("2024-05-01T10:00:04"); err != nil || !got.Equal(want.Truncate(time.Second)) {
		t.Errorf("--to-datetime 2024-05-01T10:00:04: %v (%v), want %v", got.UTC(), err, want.Truncate(time.Second))
	}
	for _, bad := range []string{"2024-05-01", "2024-05-01 10:00:04", "10:00:04", "2024-05-01T10:00:04+2"} {
		if _, err := parseDatetime(bad); err == nil {
			t.Errorf("--to-datetime %q parsed", bad)
		}
	}
}

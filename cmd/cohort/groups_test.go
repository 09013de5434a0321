package main

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/testwait"
)

type describeJSON struct {
	Groups []groupDesc `json:"groups"`
}

// describeOne describes one group as JSON.
func (c cli) describeOne(id string, extra ...string) groupDesc {
	c.t.Helper()
	var d describeJSON
	c.jsonOf(&d, append([]string{"group", "describe", id}, extra...)...)
	if len(d.Groups) != 1 || d.Groups[0].Group != id {
		c.t.Fatalf("describe %s: %+v", id, d)
	}
	return d.Groups[0]
}

// waitStable polls until id is Stable with n members, all partitions of
// its topics assigned, and the same generation for 300ms (cooperative
// consumers rebalance twice when one joins); bounded.
func (c cli) waitStable(id string, n int) groupDesc {
	c.t.Helper()
	var last *groupDesc
	var since time.Time
	var g groupDesc
	if !testwait.Until(20*time.Second, func() bool {
		g = c.describeOne(id, "--state")
		settled := g.State == "Stable" && g.MemberCount == n
		assigned := 0
		for _, m := range g.Members {
			for _, t := range m.Assignment {
				assigned += len(t.Partitions)
			}
		}
		settled = settled && assigned == 3 // the tests' topics have 3 partitions
		if settled && last != nil && last.Generation != nil == (g.Generation != nil) &&
			(g.Generation == nil || *last.Generation == *g.Generation) {
			return time.Since(since) >= 300*time.Millisecond
		}
		if !settled {
			last = nil
		} else {
			seen := g // g is overwritten by the next poll
			last, since = &seen, time.Now()
		}
		return false
	}) {
		c.t.Fatalf("group %s: state %s with %d members, want Stable with %d", id, g.State, g.MemberCount, n)
	}
	return g
}

// TestGroupCommands: groups, group describe (state, members, assignments,
// offsets, lag against a kfake data cluster, JSON), group delete and
// offsets delete against a live node.
func TestGroupCommands(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	data := startData(t, 3, "events")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "3")

	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	data.produce(t, "events", 0, 10, start)
	data.produce(t, "events", 1, 5, start)
	commit(t, n.Addr(), "idle", "events", map[int32]int64{0: 4, 1: 5})
	commit(t, n.Addr(), "idle2", "events", map[int32]int64{2: 0})

	consumer(t, n.Addr(), "live", "events", "app-a", "inst-a")
	consumer(t, n.Addr(), "live", "events", "app-b", "")
	c.waitStable("live", 2)

	// groups: list, filters, JSON.
	if out := table(c.ok("groups")); !strings.Contains(out, "GROUP STATE TYPE PROTOCOL-TYPE\nidle Empty classic -\nidle2 Empty classic -\nlive Stable classic consumer") {
		t.Fatalf("groups:\n%s", out)
	}
	if l := c.listGroups("--state", "stable"); len(l) != 1 || l[0] != (listedGroupJSON{Group: "live", State: "Stable", Type: "classic", ProtocolType: "consumer"}) {
		t.Fatalf("groups --state stable: %+v", l)
	}
	if l := c.listGroups("--state", "Empty,Stable", "--type", "classic"); len(l) != 3 {
		t.Fatalf("groups --state Empty,Stable: %+v", l)
	}
	if l := c.listGroups("--type", "consumer"); len(l) != 0 {
		t.Fatalf("groups --type consumer: %+v", l)
	}
	// Filter values are checked, in any case: a typo is a usage error, not
	// an empty list.
	if l := c.listGroups("--type", "Classic", "--state", "STABLE"); len(l) != 1 || l[0].Group != "live" {
		t.Fatalf("groups --type Classic --state STABLE: %+v", l)
	}
	if out := c.fails(2, []string{"groups", "--type", "consumers"}, `--type "consumers": want one of classic, consumer`); out != "" {
		t.Fatalf("groups --type consumers printed:\n%s", out)
	}
	c.fails(2, []string{"groups", "--state", "bogus"}, `--state "bogus": want one of`)

	// describe a live group: generation and leader (cohort's tag), the
	// coordinator, members with client id, host, instance id and decoded
	// assignment.
	g := c.describeOne("live")
	host, port, _ := net.SplitHostPort(n.Addr())
	if g.Coordinator == nil || g.Coordinator.Host != host || strconv.Itoa(int(g.Coordinator.Port)) != port {
		t.Fatalf("coordinator %+v, want %s", g.Coordinator, n.Addr())
	}
	if g.Generation == nil || *g.Generation < 1 || g.Leader == nil || g.ProtocolType != "consumer" || g.Protocol == "" || g.MemberCount != 2 || len(g.Members) != 2 {
		t.Fatalf("live: %+v", g)
	}
	var ids, clients []string
	var assigned []int32
	for _, m := range g.Members {
		ids = append(ids, m.MemberID)
		clients = append(clients, m.ClientID)
		if m.Host != "127.0.0.1" || m.AssignmentBytes == 0 || m.Assignment == nil {
			t.Fatalf("member %+v", m)
		}
		if (m.ClientID == "app-a") != (m.InstanceID != nil && *m.InstanceID == "inst-a") {
			t.Fatalf("instance id of %+v", m)
		}
		for _, tps := range m.Assignment {
			if tps.Topic != "events" {
				t.Fatalf("assignment %+v", m.Assignment)
			}
			assigned = append(assigned, tps.Partitions...)
		}
	}
	slices.Sort(clients)
	slices.Sort(assigned)
	if !slices.Contains(ids, *g.Leader) || !slices.Equal(clients, []string{"app-a", "app-b"}) || !slices.Equal(assigned, []int32{0, 1, 2}) {
		t.Fatalf("leader %s of %v, clients %v, assigned %v", *g.Leader, ids, clients, assigned)
	}
	// Its offsets rows are the assigned partitions, nothing committed.
	if len(g.Offsets) != 3 || g.Offsets[0].CurrentOffset != nil || g.Offsets[0].MemberID == nil || g.TotalLag != nil {
		t.Fatalf("live offsets %+v", g.Offsets)
	}
	out := table(c.ok("group", "describe", "live"))
	for _, want := range []string{
		"GROUP COORDINATOR STATE PROTOCOL-TYPE PROTOCOL GENERATION LEADER MEMBERS\nlive " + n.Addr() + " (node ",
		"Stable consumer " + g.Protocol + " " + strconv.Itoa(int(*g.Generation)) + " " + *g.Leader + " 2\n",
		"GROUP MEMBER-ID INSTANCE-ID CLIENT-ID HOST PARTITIONS ASSIGNMENT LAST-HEARD\n",
		" inst-a app-a 127.0.0.1 ", " - app-b 127.0.0.1 ", " events(",
		"GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG MEMBER-ID HOST CLIENT-ID\nlive events 0 - - - ",
		"total lag of live: - (lag needs --data-bootstrap)",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe live lacks %q:\n%s", want, out)
		}
	}
	if out := table(c.ok("group", "describe", "live", "--members")); strings.Contains(out, "GENERATION") || strings.Contains(out, "LAG") || !strings.Contains(out, "app-b") {
		t.Fatalf("--members:\n%s", out)
	}

	// Lag: the data cluster's end offsets minus the committed ones.
	ends := data.endOffsets(t, "events")
	idle := c.describeOne("idle", "--data-bootstrap", data.addr)
	if idle.State != "Empty" || idle.MemberCount != 0 || idle.Leader == nil || *idle.Leader != "" || len(idle.Offsets) != 2 {
		t.Fatalf("idle: %+v", idle)
	}
	var total int64
	for _, r := range idle.Offsets {
		want := ends[r.Partition] - map[int32]int64{0: 4, 1: 5}[r.Partition]
		if r.LogEndOffset == nil || *r.LogEndOffset != ends[r.Partition] || r.Lag == nil || *r.Lag != want || r.LogStartOffset == nil || *r.LogStartOffset != 0 {
			t.Fatalf("idle partition %d: %+v, end %d", r.Partition, r, ends[r.Partition])
		}
		total += want
	}
	if total != 6 || idle.TotalLag == nil || *idle.TotalLag != total {
		t.Fatalf("total lag %v, want %d", idle.TotalLag, total)
	}
	if out := table(c.ok("offsets", "idle", "--data-bootstrap", data.addr)); !strings.Contains(out,
		"GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG MEMBER-ID HOST CLIENT-ID LOG-START-OFFSET LEADER-EPOCH METADATA\n"+
			"idle events 0 4 10 6 - - - 0 - -\nidle events 1 5 5 0 - - - 0 - -\ntotal lag of idle: 6") {
		t.Fatalf("offsets idle:\n%s", out)
	}
	if out := table(c.ok("offsets", "show", "idle")); !strings.Contains(out, "idle events 0 4 - - - - - - - -\n") {
		t.Fatalf("offsets idle without data:\n%s", out)
	}

	// --all-groups; a missing group is an error (the server's message),
	// the groups that exist are still shown.
	var all describeJSON
	c.jsonOf(&all, "group", "describe", "--all-groups", "--state")
	if len(all.Groups) != 3 || all.Groups[0].Group != "idle" || all.Groups[2].Group != "live" {
		t.Fatalf("--all-groups: %+v", all)
	}
	out = c.fails(1, []string{"group", "describe", "idle", "nope", "--state"}, "describe nope: GROUP_ID_NOT_FOUND: group nope not found")
	if !strings.Contains(out, "idle") {
		t.Fatalf("the group that exists is not shown:\n%s", out)
	}
	c.fails(1, []string{"offsets", "nope"}, "describe nope")

	// A peer without cohort's tag (kfake): generation and leader unknown.
	consumer(t, data.addr, "kg", "events", "kapp", "")
	kc := cli{t: t, base: []string{"--bootstrap", data.addr}}
	kc.waitStable("kg", 1)
	if kg := kc.describeOne("kg"); kg.Generation != nil || kg.Leader != nil || kg.MemberCount != 1 {
		t.Fatalf("kfake group: %+v", kg)
	}
	if out := table(kc.ok("group", "describe", "kg", "--state")); !strings.HasPrefix(out, "GROUP COORDINATOR STATE PROTOCOL-TYPE PROTOCOL GENERATION LEADER MEMBERS\nkg ") ||
		!strings.HasSuffix(out, " Stable consumer cooperative-sticky - - 1") {
		t.Fatalf("kfake describe:\n%s", out)
	}

	// offsets delete: one partition, then the rest of the topic; a group
	// that consumes the topic refuses.
	commit(t, n.Addr(), "idle3", "events", map[int32]int64{0: 1, 1: 2, 2: 3})
	if out := table(c.ok("offsets", "delete", "idle3", "--topic", "events:1")); out != "GROUP TOPIC PARTITION RESULT\nidle3 events 1 deleted" {
		t.Fatalf("offsets delete:\n%s", out)
	}
	if got := committed(t, n.Addr(), "idle3", "events"); len(got) != 2 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("after delete: %v", got)
	}
	var del struct {
		Group      string              `json:"group"`
		Partitions []deletedOffsetJSON `json:"partitions"`
	}
	c.jsonOf(&del, "offsets", "delete", "idle3", "--topic", "events")
	if del.Group != "idle3" || len(del.Partitions) != 2 || !del.Partitions[0].Deleted || del.Partitions[1].Partition != 2 {
		t.Fatalf("offsets delete json: %+v", del)
	}
	c.fails(1, []string{"offsets", "delete", "idle3", "--topic", "events"}, "no committed offsets for topic events")
	c.fails(1, []string{"offsets", "delete", "live", "--topic", "events:0"}, "GROUP_SUBSCRIBED_TO_TOPIC")
	c.fails(2, []string{"offsets", "delete", "idle3"}, "want --topic")
	// Deleting a topic deletes its offsets (as Kafka does).
	c.ok("topic", "create", "gone", "--partitions", "2")
	commit(t, n.Addr(), "idle6", "gone", map[int32]int64{0: 4, 1: 5})
	c.ok("topic", "delete", "gone")
	// By name (v9): a v10 fetch of all topics leaves out a topic outside
	// the catalog at once, before its tombstones are written.
	bcl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), byname.Opt())
	if err != nil {
		t.Fatal(err)
	}
	defer bcl.Close()
	actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(bcl)
	var left kadm.OffsetResponses
	if !testwait.Until(5*time.Second, func() bool {
		// Until the tombstones are written, the answer holds offsets of
		// a topic franz-go no longer finds in Metadata (it marks them
		// UNKNOWN_TOPIC_OR_PARTITION).
		var err error
		left, err = adm.FetchOffsets(actx, "idle6")
		return err == nil && len(left["gone"]) == 0
	}) {
		t.Fatalf("offsets of a deleted topic: %v", left)
	}
	// Deleting them again says there are none (not that the topic is
	// unknown: the partitions come from the group's offsets, not Metadata).
	c.fails(1, []string{"offsets", "delete", "idle6", "--topic", "gone"}, "no committed offsets for topic gone")

	// group delete: several at once; a missing or busy group fails the
	// command, the others are deleted.
	// The server says why (DeleteGroups v3's message per group).
	out = c.fails(1, []string{"group", "delete", "idle", "live", "nope"},
		`delete live: NON_EMPTY_GROUP: group "live" is `, "only a group without members can be deleted",
		`delete nope: GROUP_ID_NOT_FOUND: group "nope" does not exist`)
	if !strings.Contains(table(out), "GROUP RESULT\nidle deleted\nlive error: NON_EMPTY_GROUP") {
		t.Fatalf("group delete:\n%s", out)
	}
	var deleted struct {
		Groups []deletedGroupJSON `json:"groups"`
	}
	// A group named twice is answered once.
	c.jsonOf(&deleted, "group", "delete", "idle2", "idle3", "idle2")
	if len(deleted.Groups) != 2 || deleted.Groups[0].Group != "idle2" || deleted.Groups[1].Group != "idle3" || !deleted.Groups[0].Deleted || deleted.Groups[1].Error != nil {
		t.Fatalf("group delete json: %+v", deleted)
	}
	c.fails(1, []string{"group", "describe", "idle"}, "describe idle")
}

// TestDataCommandConfig: the data cluster's own security settings come from
// --data-command-config (Kafka client properties), apart from cohort's.
func TestDataCommandConfig(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	sc := startSecureKfake(t) // SASL_SSL, topic events with 1 partition
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events")
	commit(t, n.Addr(), "idle", "events", map[int32]int64{0: 0})
	props := writeTemp(t, "data.properties", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"+
		"ssl.ca.location="+sc.ca.CertFile+"\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-pw";`+"\n")
	g := c.describeOne("idle", "--data-bootstrap", sc.addr, "--data-command-config", props)
	if len(g.Offsets) != 1 || g.Offsets[0].LogEndOffset == nil || *g.Offsets[0].LogEndOffset != 0 || g.TotalLag == nil || *g.TotalLag != 0 {
		t.Fatalf("%+v", g)
	}
	// Without it the data cluster does not answer; cohort's settings are
	// not used for it.
	c.fails(1, []string{"group", "describe", "idle", "--data-bootstrap", sc.addr, "--timeout", "2s"}, "the data cluster at "+sc.addr)
	c.fails(1, []string{"group", "describe", "idle", "--data-bootstrap", sc.addr, "--data-command-config", "/nonexistent.properties"}, "--data-command-config")
}

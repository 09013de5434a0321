package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
)

// TestGroupRequestsInBatches: the commands that ask about many groups at
// once (group describe --all-groups, group delete and its --dry-run, topic
// delete --dry-run, which reads every group's offsets) name at most
// groupBatch groups per request. They named every group in one request:
// past the 100,000 groups a request may name, the node closed the
// connection and the command failed (topic delete --dry-run: "offsets of
// group cg-000000: EOF") or retried until killed (group describe
// --all-groups), on a node holding 101,001 groups.
func TestGroupRequestsInBatches(t *testing.T) {
	defer func(n int) { groupBatch = n }(groupBatch)
	groupBatch = 2
	var mu sync.Mutex
	largest := map[string]int{} // the most groups one request of each API named
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n := startNodeConfig(t, node.Config{Listen: "127.0.0.1:0", Group: cfg,
		Tap: func(_ server.Client, req kmsg.Request, _ kmsg.Response) {
			k := 0
			switch r := req.(type) {
			case *kmsg.DescribeGroupsRequest:
				k = len(r.Groups)
			case *kmsg.ConsumerGroupDescribeRequest:
				k = len(r.Groups)
			case *kmsg.OffsetFetchRequest:
				k = len(r.Groups)
			case *kmsg.DeleteGroupsRequest:
				k = len(r.Groups)
			default:
				return
			}
			mu.Lock()
			name := kmsg.NameForKey(req.Key())
			largest[name] = max(largest[name], k)
			mu.Unlock()
		}})
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "2")
	var ids []string
	for i := range 5 {
		id := fmt.Sprintf("g%d", i)
		ids = append(ids, id)
		commit(t, n.Addr(), id, "events", map[int32]int64{0: int64(i), 1: 7})
	}
	check := func(what string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for api, k := range largest {
			if k > groupBatch {
				t.Errorf("%s: a %s named %d groups, want at most %d", what, api, k, groupBatch)
			}
		}
		clear(largest)
	}

	out := c.ok("group", "describe", "--all-groups")
	for _, id := range ids {
		if !strings.Contains(out, id) {
			t.Errorf("group describe --all-groups: no %s in\n%s", id, out)
		}
	}
	check("group describe --all-groups")

	out = c.ok("topic", "delete", "events", "--dry-run")
	if !strings.Contains(out, "committed offsets of 5 groups: g0, g1, g2, g3, g4") {
		t.Errorf("topic delete --dry-run:\n%s", out)
	}
	check("topic delete --dry-run")

	out = c.ok(append([]string{"group", "delete", "--dry-run"}, ids...)...)
	if got := strings.Count(out, " yes\n"); got != 5 {
		t.Errorf("group delete --dry-run: %d groups to delete, want 5:\n%s", got, out)
	}
	check("group delete --dry-run")

	c.ok(append([]string{"group", "delete", "--yes"}, ids...)...)
	check("group delete")
	if left := c.listGroups(); slices.ContainsFunc(left, func(g listedGroupJSON) bool { return strings.HasPrefix(g.Group, "g") }) {
		t.Errorf("groups left after group delete: %+v", left)
	}
}

// TestGroupDeleteManyIDsLinear: group delete drops the ids named twice in
// linear time. It compared each id with every one kept before it: 50,000
// ids (a list of groups passed with xargs) took seconds before the first
// request was sent.
func TestGroupDeleteManyIDsLinear(t *testing.T) {
	const n, bound = 50_000, time.Second
	ids := make([]string, 0, n+2)
	for i := range n {
		ids = append(ids, fmt.Sprintf("group-%06d", i))
	}
	ids = append(ids, "group-000007", "group-000003")
	start := time.Now()
	got := distinctIDs(ids)
	if d := time.Since(start); d > bound {
		t.Errorf("%d ids: %v, want under %v", len(ids), d, bound)
	}
	if !slices.Equal(got, ids[:n]) {
		t.Errorf("distinct ids: %d of them, want the first %d in order", len(got), n)
	}
}

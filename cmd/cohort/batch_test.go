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
	c, ids, tap := batchNode(t, 5)
	check := func(what string) {
		t.Helper()
		for _, r := range tap() {
			if r.groups > groupBatch {
				t.Errorf("%s: a %s named %d groups, want at most %d", what, r.api, r.groups, groupBatch)
			}
		}
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

// groupRequest is one request naming groups: its API and how many.
type groupRequest struct {
	api    string
	groups int
}

// batchNode starts a node holding n groups g0... with offsets of topic
// events, and returns a cli on it, the group ids, and tap, which returns
// the DescribeGroups, ConsumerGroupDescribe, OffsetFetch and DeleteGroups
// requests served since its last call.
func batchNode(t *testing.T, n int) (cli, []string, func() []groupRequest) {
	var mu sync.Mutex
	var seen []groupRequest
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	nd := startNodeConfig(t, node.Config{Listen: "127.0.0.1:0", Group: cfg,
		Tap: func(_ server.Client, req kmsg.Request, _ kmsg.Response) {
			k := 0
			switch r := req.(type) {
			case *kmsg.DescribeGroupsRequest:
				k = len(r.Groups)
			case *kmsg.ConsumerGroupDescribeRequest:
				k = len(r.Groups)
			case *kmsg.OffsetFetchRequest:
				k = max(len(r.Groups), 1) // v0-7: one group
			case *kmsg.DeleteGroupsRequest:
				k = len(r.Groups)
			default:
				return
			}
			mu.Lock()
			seen = append(seen, groupRequest{kmsg.NameForKey(req.Key()), k})
			mu.Unlock()
		}})
	c := cli{t: t, base: []string{"--bootstrap", nd.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "2")
	var ids []string
	for i := range n {
		id := fmt.Sprintf("g%d", i)
		ids = append(ids, id)
		commit(t, nd.Addr(), id, "events", map[int32]int64{0: int64(i), 1: 7})
	}
	tap := func() []groupRequest {
		mu.Lock()
		defer mu.Unlock()
		got := seen
		seen = nil
		return got
	}
	tap()
	return c, ids, tap
}

// TestDescribeAllGroupsFetchesOffsetsInBatches: group describe reads the
// committed offsets of its groups groupBatch groups per request. It sent
// one OffsetFetch per group, one after the other: at 101,001 groups
// group describe --all-groups took 187 s.
func TestDescribeAllGroupsFetchesOffsetsInBatches(t *testing.T) {
	defer func(n int) { groupBatch = n }(groupBatch)
	groupBatch = 2
	c, ids, tap := batchNode(t, 5)
	out := c.ok("group", "describe", "--all-groups", "--offsets")
	fetches := 0
	for _, r := range tap() {
		if r.api == "OffsetFetch" {
			fetches++
		}
	}
	if fetches > 3 {
		t.Errorf("group describe --all-groups of 5 groups sent %d OffsetFetch requests, want at most 3 (batches of 2)", fetches)
	}
	// Every group's two partitions, with their committed offsets.
	for i, id := range ids {
		for _, want := range []string{fmt.Sprintf("%s events 0 %d", id, i), fmt.Sprintf("%s events 1 7", id)} {
			if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
				t.Errorf("no %q in\n%s", want, out)
			}
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
)

// TestTopicDeleteDryRunAsksForTheTopic: topic delete --dry-run asks each
// group for its offsets of the topic to delete alone, groupBatch groups per
// OffsetFetch, and lists the same groups as when it read every offset of
// every group: those with a committed offset of one of the topic's
// partitions, sorted. It read all of them (OffsetFetch naming no topic):
// about 700 MiB of the CLI at 100,000 groups to list the 36 holding one
// topic (docs/benchmarks.md, "Admin paths at scale").
func TestTopicDeleteDryRunAsksForTheTopic(t *testing.T) {
	defer func(n int) { groupBatch = n }(groupBatch)
	groupBatch = 2
	var mu sync.Mutex
	var fetches []*kmsg.OffsetFetchRequest
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	nd := startNodeConfig(t, node.Config{Listen: "127.0.0.1:0", Group: cfg,
		Tap: func(_ server.Client, req kmsg.Request, _ kmsg.Response) {
			if r, ok := req.(*kmsg.OffsetFetchRequest); ok {
				mu.Lock()
				fetches = append(fetches, r)
				mu.Unlock()
			}
		}})
	c := cli{t: t, base: []string{"--bootstrap", nd.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "3")
	c.ok("topic", "create", "other", "--partitions", "2")
	commit(t, nd.Addr(), "zeta", "events", map[int32]int64{2: 5})
	commit(t, nd.Addr(), "alpha", "events", map[int32]int64{0: 0})
	commit(t, nd.Addr(), "both", "events", map[int32]int64{1: 9})
	commit(t, nd.Addr(), "both", "other", map[int32]int64{0: 1})
	commit(t, nd.Addr(), "elsewhere", "other", map[int32]int64{0: 3, 1: 4})
	commit(t, nd.Addr(), "mid", "events", map[int32]int64{0: 1, 1: 2, 2: 3})

	out := c.ok("topic", "delete", "events", "--dry-run")
	want := "to delete: topic events (3 partitions); with it the committed offsets of 4 groups: alpha, both, mid, zeta\n" +
		"dry run: nothing deleted; run again without --dry-run to delete\n"
	if out != want {
		t.Errorf("topic delete events --dry-run:\n%s\nwant:\n%s", out, want)
	}
	out = c.ok("topic", "delete", "events", "--dry-run", "--output", "json")
	wantJSON := `{"topic":"events","partitions":3,"groups_with_offsets":["alpha","both","mid","zeta"],"deleted":false}`
	if got := compactJSON(t, out); got != wantJSON {
		t.Errorf("topic delete events --dry-run --output json:\n%s\nwant:\n%s", got, wantJSON)
	}
	out = c.ok("topic", "delete", "other", "--dry-run")
	want = "to delete: topic other (2 partitions); with it the committed offsets of 2 groups: both, elsewhere\n" +
		"dry run: nothing deleted; run again without --dry-run to delete\n"
	if out != want {
		t.Errorf("topic delete other --dry-run:\n%s\nwant:\n%s", out, want)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(fetches) == 0 {
		t.Fatal("no OffsetFetch served")
	}
	for _, r := range fetches {
		if len(r.Groups) > groupBatch {
			t.Errorf("an OffsetFetch named %d groups, want at most %d", len(r.Groups), groupBatch)
		}
		for _, g := range r.Groups {
			if len(g.Topics) != 1 || !slices.Contains([]string{"events", "other"}, g.Topics[0].Topic) {
				t.Errorf("OffsetFetch of group %s asked for topics %+v, want only the topic to delete", g.Group, g.Topics)
			}
		}
	}
}

// compactJSON is out's JSON without its spaces and line breaks.
func compactJSON(t *testing.T, out string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(out)); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return b.String()
}

package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestAdminCommands runs the admin subcommands against an in-process node.
func TestAdminCommands(t *testing.T) {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n, err := node.Start(node.Config{Listen: "127.0.0.1:0", Store: memstore.New(), Group: cfg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.WaitLoaded(context.Background())
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := admin(args[0], append(args[1:], "--bootstrap", n.Addr()), &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	if out := run("topic", "create", "events", "--partitions", "6"); !strings.Contains(out, "created events with 6 partitions") {
		t.Fatal(out)
	}
	if out := run("topic", "grow", "events", "--partitions", "8"); !strings.Contains(out, "8 partitions") {
		t.Fatal(out)
	}
	if out := run("topics"); !strings.Contains(out, "events") || !strings.Contains(out, "8") {
		t.Fatal(out)
	}
	// A member joins (raw JoinGroup v3) and commits; the group shows up.
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Group, c.Generation = "g1", -1
	c.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "events", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 3, Offset: 42, LeaderEpoch: -1}}}}
	if _, err := c.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if out := run("groups"); !strings.Contains(out, "g1") || !strings.Contains(out, "Empty") {
		t.Fatal(out)
	}
	if out := run("offsets", "g1"); !strings.Contains(out, "events") || !strings.Contains(out, "42") {
		t.Fatal(out)
	}
	if out := run("group", "describe", "g1"); !strings.Contains(out, "state Empty") {
		t.Fatal(out)
	}
	if out := run("group", "delete", "g1"); !strings.Contains(out, "deleted group g1") {
		t.Fatal(out)
	}
	if out := run("topic", "delete", "events"); !strings.Contains(out, "deleted events") {
		t.Fatal(out)
	}
	var out bytes.Buffer
	if err := admin("group", []string{"describe", "nope", "--bootstrap", n.Addr()}, &out); err == nil {
		t.Fatal("describing a missing group should fail")
	}
}

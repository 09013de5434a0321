package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestGroupConfigCommand: "cohort group config" shows a group's settings
// with their source, sets and removes them, and a refused change says why
// and changes nothing.
func TestGroupConfigCommand(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}

	if out := table(c.ok("group", "config", "workers")); !strings.Contains(out,
		"NAME VALUE SOURCE\nconsumer.session.timeout.ms 45000 default\nconsumer.heartbeat.interval.ms 5000 default\nconsumer.assignment.interval.ms") {
		t.Fatalf("before:\n%s", out)
	}
	out := table(c.ok("group", "config", "workers", "--set", "consumer.session.timeout.ms=60000", "--set", "consumer.heartbeat.interval.ms=3000"))
	if !strings.Contains(out, "consumer.session.timeout.ms 60000 group\nconsumer.heartbeat.interval.ms 3000 group") {
		t.Fatalf("after --set:\n%s", out)
	}
	// Refused as a whole: the session would not exceed the interval.
	c.fails(1, []string{"group", "config", "workers", "--set", "consumer.heartbeat.interval.ms=90000"},
		"INVALID_CONFIG: consumer.session.timeout.ms (60000) must be greater than consumer.heartbeat.interval.ms (90000")
	c.fails(1, []string{"group", "config", "workers", "--set", "retention.ms=1"}, "unknown group config name: retention.ms")
	c.fails(2, []string{"group", "config", "workers", "--set", "novalue"}, `--set wants NAME=VALUE`)
	c.fails(2, []string{"group", "describe", "workers", "--set", "a=1"}, "group describe: --set is not one of its flags")
	c.fails(2, []string{"group", "config", "workers", "--list"}, "takes no group id")
	c.ok("group", "config", "idle-pool", "--set", "consumer.assignment.interval.ms=0")
	if out := table(c.ok("group", "config", "--list")); out != "GROUP\nidle-pool\nworkers" {
		t.Fatalf("--list:\n%s", out)
	}
	c.fails(2, []string{"group", "config", "a", "b"}, "want one group id")

	var doc struct {
		Group   string            `json:"group"`
		Configs []groupConfigJSON `json:"configs"`
	}
	if err := json.Unmarshal([]byte(c.ok("group", "config", "workers", "--delete", "consumer.session.timeout.ms", "--output", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Group != "workers" || len(doc.Configs) != 3 ||
		doc.Configs[0] != (groupConfigJSON{Name: "consumer.session.timeout.ms", Value: "45000", Source: "default"}) ||
		doc.Configs[1] != (groupConfigJSON{Name: "consumer.heartbeat.interval.ms", Value: "3000", Source: "group"}) {
		t.Fatalf("after --delete: %+v", doc)
	}
}

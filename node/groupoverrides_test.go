package node

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
)

// The node parses a group's configs once per change and says in its log,
// once, when a group's stored pair cannot run with the node's settings.
func TestGroupOverridesParsedAndChecked(t *testing.T) {
	var logs bytes.Buffer
	cat := catalog.New(catalog.Options{})
	cfg := group.Defaults()
	cfg.ConsumerSessionTimeout = 20 * time.Second // restarted with a shorter session than when the config was set
	o := newGroupOverrides(cat, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if got := o.get("g"); got != (group.Overrides{}) {
		t.Fatalf("no configs: %+v", got)
	}
	if err := cat.SetGroupConfig("g", map[string]string{group.ConfigHeartbeatInterval: "30000", group.ConfigAssignmentInterval: "0"}); err != nil {
		t.Fatal(err)
	}
	want := group.Overrides{HeartbeatInterval: 30 * time.Second, HasAssignmentInterval: true}
	for range 3 {
		if got := o.get("g"); got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
	// Another group's change rebuilds the table: g's pair is not logged
	// again.
	if err := cat.SetGroupConfig("other", map[string]string{group.ConfigAssignmentInterval: "0"}); err != nil {
		t.Fatal(err)
	}
	o.get("g")
	if n := strings.Count(logs.String(), "group config: the group's session timeout is not above its heartbeat interval"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
	}
	if err := cat.SetGroupConfig("g", map[string]string{group.ConfigSessionTimeout: "40000", group.ConfigHeartbeatInterval: "30000"}); err != nil {
		t.Fatal(err)
	}
	if got := o.get("g"); got.SessionTimeout != 40*time.Second || got.HasAssignmentInterval {
		t.Fatalf("after a change: %+v", got)
	}
	if n := strings.Count(logs.String(), "WARN"); n != 1 {
		t.Fatalf("a consistent pair logged:\n%s", logs.String())
	}
}

// BenchmarkGroupOverridesGet: what a consumer-protocol heartbeat pays per
// lookup of its group's settings (three or four per heartbeat), with no
// group configured and with 1,000.
func BenchmarkGroupOverridesGet(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("configured=%d", n), func(b *testing.B) {
			cat := catalog.New(catalog.Options{})
			for i := range n {
				if err := cat.SetGroupConfig(fmt.Sprint("g", i), map[string]string{group.ConfigSessionTimeout: "60000"}); err != nil {
					b.Fatal(err)
				}
			}
			o := newGroupOverrides(cat, group.Defaults(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			b.ReportAllocs()
			for b.Loop() {
				o.get("g7")
			}
		})
	}
}

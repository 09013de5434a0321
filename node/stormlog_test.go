package node

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/logburst"
)

// The storm lines are logged at most logburst.Max a window over all groups,
// the next line saying how many were left out: a client that makes group
// after group storm (a member joining and leaving eleven times flags a
// group at the default threshold) logged a warn line for every group, and
// an info line for each when its window cleared. The metrics
// count every storm, and the console's groups page marks each group.
func TestStormLogBounded(t *testing.T) {
	var buf bytes.Buffer
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var cfg group.Config
	logStorms(&cfg, slog.New(slog.NewTextHandler(&buf, nil)), clk)
	for i := range 100 {
		cfg.OnStorm(group.StormStatus{Group: fmt.Sprint("g", i), Flagged: true, Count: 11, Threshold: 10, WindowMs: 300000})
	}
	for i := range 100 {
		cfg.OnStorm(group.StormStatus{Group: fmt.Sprint("g", i)})
	}
	if n := strings.Count(buf.String(), "rebalancing in a storm"); n != logburst.Max {
		t.Fatalf("%d storm lines for 100 groups flagged and unflagged in one window, want %d", n, logburst.Max)
	}
	clk.Advance(logburst.Window)
	buf.Reset()
	cfg.OnStorm(group.StormStatus{Group: "h", Flagged: true, Count: 11, Threshold: 10, WindowMs: 300000})
	if s := buf.String(); !strings.Contains(s, "group=h") || !strings.Contains(s, fmt.Sprint("unlogged_before=", 200-logburst.Max)) {
		t.Fatalf("the next window's line: %s", s)
	}
}

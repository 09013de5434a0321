package cluster_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestCloseLogsNoWarning: a node that stops hands its partitions over and
// says so at INFO (why=closing); a WARN there would trip alerts on every
// clean restart. (A lost lease still warns: the other tests' nodes.)
func TestCloseLogsNoWarning(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	var logs testlog.Buffer
	n, err := node.Start(nodeConfig(1, ec.Endpoints(), testLeaseTTL, // a lease lost under load would warn
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	if !testwait.Until(20*time.Second, func() bool { return len(n.Cluster().OwnedPartitions()) == partitions }) {
		t.Fatalf("the node serves %d of %d partitions after 20s", len(n.Cluster().OwnedPartitions()), partitions)
	}
	n.Close()
	out := logs.String()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("on a clean stop: %s", l)
		}
	}
	if !strings.Contains(out, `level=INFO msg="cluster: stopped serving all partitions" why=closing`) {
		t.Errorf("no INFO line about handing the partitions over:\n%s", out)
	}
}

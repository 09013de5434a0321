package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestSIGUSR1InClusterMode: in cluster mode, where the state is in etcd,
// SIGUSR1 says so (and how to back etcd up) whether --backup-dir is set or
// not. Without --backup-dir it used to say only that --backup-dir was not
// set, sending the operator to set it and restart, after which the next
// signal logged "backup started" with a directory never written, then
// failed.
func TestSIGUSR1InClusterMode(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	n, err := node.Start(node.Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 2,
		Logger:  slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)),
		Cluster: &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/usr1/", LeaseTTL: testLeaseTTL}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dir := filepath.Join(t.TempDir(), "backups")
	for _, d := range []string{"", dir} {
		buf.Reset()
		var busy atomic.Bool
		backup(n, d, &busy, log)
		// A backup, had one started, runs on a goroutine of its own and
		// clears busy when it ends.
		testwait.For(t, 10*time.Second, "the backup's end", func() bool { return !busy.Load() })
		got := buf.String()
		if !strings.Contains(got, "cluster mode") || !strings.Contains(got, "etcdctl snapshot save") || strings.Contains(got, "backup started") {
			t.Errorf("SIGUSR1 in cluster mode with --backup-dir %q logged:\n%s", d, got)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("SIGUSR1 in cluster mode created %s", dir)
	}
}

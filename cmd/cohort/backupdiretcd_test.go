package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeEtcdWarnsOfBackupDir: examples/systemd's settings hold
// COHORT_BACKUP_DIR, and a node moved into a cluster keeps it unless told
// otherwise; in cluster mode SIGUSR1 writes no backup, so a backup job
// that signals the node would quietly have none. The start warns, naming
// the setting as it was given and etcd's own snapshots; a start without
// one gets no such line.
func TestServeEtcdWarnsOfBackupDir(t *testing.T) {
	run := func(env []string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// No etcd listens there: the start fails once the warnings are
		// logged, when the node dials it.
		cmd := cohortCommand(ctx, t, append([]string{"serve", "--listen", "127.0.0.1:0", "--etcd", closedAddr(t), "--log-level", "warn"}, args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(cmd.Env, env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil {
			t.Fatalf("serve with an unreachable etcd exited 0:\n%s", stderr.String())
		}
		return stderr.String()
	}
	dir := filepath.Join(t.TempDir(), "backups")
	for _, tc := range []struct {
		how  string
		env  []string
		args []string
	}{
		{"--backup-dir", nil, []string{"--backup-dir", dir}},
		{"$COHORT_BACKUP_DIR", []string{"COHORT_BACKUP_DIR=" + dir}, nil},
	} {
		out := run(tc.env, tc.args...)
		var line string
		for l := range strings.Lines(out) {
			if strings.Contains(l, tc.how+" is not used in cluster mode") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("cluster mode with %s: no warning; stderr:\n%s", tc.how, out)
			continue
		}
		for _, w := range []string{"level=WARN", "SIGUSR1", "etcdctl snapshot save"} {
			if !strings.Contains(line, w) {
				t.Errorf("warning %q does not hold %q", line, w)
			}
		}
	}
	if out := run(nil); strings.Contains(out, "not used in cluster mode") {
		t.Errorf("cluster mode without a backup directory warns of one:\n%s", out)
	}
}

package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cohort-dev/cohort/internal/testready"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/memstore"
)

func commitAt(t *testing.T, adm *kadm.Client, at int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "events", Partition: 0, At: at, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "g", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit %d: %v %v", at, err, r.Error())
	}
}

func committed(t *testing.T, addr string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := kadm.NewClient(client(t, addr)).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := got.Lookup("events", 0)
	if !ok {
		return -1
	}
	return o.At
}

// TestBackupRestores: a backup taken while the node serves holds what was
// committed before it and not what came after; a node started on it serves
// those offsets. Nodes without an embedded store refuse.
func TestBackupRestores(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	root := t.TempDir()
	n, err := Start(Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(root, "data"), Partitions: 5, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(client(t, n.Addr()))
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	commitAt(t, adm, 42)
	backup := filepath.Join(root, "backups", "b1")
	if err := n.Backup(context.Background(), backup); err != nil {
		t.Fatal(err)
	}
	commitAt(t, adm, 43)
	if got := committed(t, n.Addr()); got != 43 {
		t.Fatalf("live node after the backup: %d", got)
	}
	n.Close()

	r, err := Start(Config{Listen: "127.0.0.1:0", DataDir: backup, Partitions: 5, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := committed(t, r.Addr()); got != 42 {
		t.Fatalf("node started on the backup: offset %d, want 42", got)
	}

	m, err := Start(Config{Listen: "127.0.0.1:0", Store: memstore.New(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Backup(context.Background(), filepath.Join(root, "mem")); !errors.Is(err, ErrNoBackup) {
		t.Errorf("backup of a node on an in-memory store: %v", err)
	}
}

// TestSIGUSR1WritesABackup: cohort serve writes a backup into --backup-dir
// on SIGUSR1 and logs where; without --backup-dir it says so and goes on.
func TestSIGUSR1WritesABackup(t *testing.T) {
	bin := cohortBinary(t)
	for _, withDir := range []bool{true, false} {
		root := t.TempDir()
		addr := freePort(t)
		args := []string{"serve", "--listen", addr, "--data-dir", filepath.Join(root, "data"), "--log-level", "info"}
		if withDir {
			args = append(args, "--backup-dir", filepath.Join(root, "backups"))
		}
		serve := exec.Command(bin, args...)
		logs := &logTail{}
		serve.Stdout, serve.Stderr = os.Stderr, logs
		cmd := testready.Start(t, serve, childReadyWithin)
		cmd.Process.Signal(syscall.SIGUSR1)
		want := "SIGUSR1: no backup written: --backup-dir is not set"
		if withDir {
			want = "SIGUSR1: backup written"
		}
		if !testwait.Until(20*time.Second, func() bool { return logs.has(want) }) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no %q logged 20s after SIGUSR1", want)
		}
		if withDir {
			ents, err := os.ReadDir(filepath.Join(root, "backups"))
			if err != nil || len(ents) != 1 || !regexp.MustCompile(`^cohort-\d{8}T\d{6}\.\d{3}Z$`).MatchString(ents[0].Name()) {
				t.Errorf("backups: %v %v", ents, err)
			} else if _, err := os.Stat(filepath.Join(root, "backups", ents[0].Name(), "COHORT-STORE")); err != nil {
				t.Errorf("the backup has no store marker: %v", err)
			}
		}
		// Still serving, and stops cleanly.
		select {
		case <-cmd.Exited():
			t.Fatalf("cohort exited after SIGUSR1: %v", cmd.Wait())
		default:
		}
		testwait.Listening(t, 20*time.Second, addr)
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	}
}

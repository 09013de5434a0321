package node

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestFailedStartLeavesNoDataDir: a start that fails after opening the
// store (here: the listen address is taken) removes the data directory it
// created, parents included, and leaves a directory that existed before
// alone.
func TestFailedStartLeavesNoDataDir(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(dir string) error {
		n, err := Start(Config{Listen: taken.Addr().String(), DataDir: dir, Logger: quiet})
		if err == nil {
			n.Close()
		}
		return err
	}

	t.Run("new directory", func(t *testing.T) {
		root := t.TempDir()
		dir := filepath.Join(root, "a", "b", "data")
		if err := start(dir); err == nil {
			t.Fatal("Start on a taken address succeeded")
		}
		if _, err := os.Stat(filepath.Join(root, "a")); !os.IsNotExist(err) {
			t.Fatalf("after the failed start, %s/a: %v; want it not to exist", root, err)
		}
	})
	t.Run("existing directory", func(t *testing.T) {
		dir := t.TempDir()
		keep := filepath.Join(dir, "keep")
		if err := os.WriteFile(keep, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		// The missing data directory goes, its existing parent stays.
		sub := filepath.Join(dir, "data")
		if err := start(sub); err == nil {
			t.Fatal("Start on a taken address succeeded")
		}
		if _, err := os.Stat(sub); !os.IsNotExist(err) {
			t.Fatalf("%s: %v; want it removed", sub, err)
		}
		if _, err := os.Stat(keep); err != nil {
			t.Fatalf("the existing parent's file: %v", err)
		}
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := start(sub); err == nil {
			t.Fatal("Start on a taken address succeeded")
		}
		if _, err := os.Stat(sub); err != nil {
			t.Fatalf("a data directory that existed before the failed start: %v; want it kept", err)
		}
	})
	t.Run("successful start creates it", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "x", "data")
		n, err := Start(Config{Listen: "127.0.0.1:0", DataDir: dir, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		n.Close()
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("data directory after a successful start: %v", err)
		}
	})
}

// TestLockedStartLeavesTheOtherStore: a start that found its data
// directory missing, while another process created and locked it before
// this start's Open, fails (the store is locked) without removing that
// directory: it is the other process's live store, whose acknowledged
// commits the removal destroyed.
func TestLockedStartLeavesTheOtherStore(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := filepath.Join(t.TempDir(), "nest", "data")
	var first *Node
	beforeStoreOpen = func() {
		beforeStoreOpen = nil
		n, err := Start(Config{Listen: "127.0.0.1:0", DataDir: dir, Logger: quiet})
		if err != nil {
			t.Errorf("the first node: %v", err)
			return
		}
		first = n
	}
	defer func() { beforeStoreOpen = nil }()
	if n, err := Start(Config{Listen: "127.0.0.1:0", DataDir: dir, Logger: quiet}); err == nil {
		n.Close()
		t.Fatal("a second node opened a locked store")
	}
	if first == nil {
		t.Fatal("the first node did not start")
	}
	defer first.Close()
	if _, err := os.Stat(filepath.Join(dir, "COHORT-STORE")); err != nil {
		t.Fatalf("the first node's store after the second's failed start: %v", err)
	}
}

// TestRequestPartitionLimitFollowsTheCatalog: a node that lets its catalog
// hold more partitions than the server's default request bound lets a
// request name as many (a consumer committing every partition it owns was
// cut off), and one without a catalog bound sets none.
func TestRequestPartitionLimitFollowsTheCatalog(t *testing.T) {
	for _, tc := range []struct{ catalog, want int64 }{
		{1_000_000, 1_000_000}, {10, 1_000_000}, {5_000_000, 5_000_000}, {0, -1},
	} {
		if got := requestPartitionLimit(tc.catalog); got != tc.want {
			t.Errorf("catalog bound %d: request bound %d, want %d", tc.catalog, got, tc.want)
		}
	}
}

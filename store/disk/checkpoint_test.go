package disk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/cohort-dev/cohort/store"
)

// contents reads partitions 0..n-1 of s into one map "p/key" -> value.
func contents(t *testing.T, s *Store, n int32) map[string]string {
	t.Helper()
	got := map[string]string{}
	for p := range n {
		if err := s.Load(context.Background(), p, func(r store.Record) error {
			got[fmt.Sprintf("%d/%s", p, r.Key)] = string(r.Value)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func appendN(t *testing.T, s *Store, from, to int, value string) {
	t.Helper()
	for i := from; i < to; i++ {
		p := int32(i % 3)
		recs := []store.Record{rec(fmt.Sprintf("k%03d", i), value), rec(fmt.Sprintf("k%03d", i%7), value+"-over")}
		if err := s.Append(context.Background(), p, recs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpoint: a checkpoint holds every acknowledged append made before
// it, folded or still in the record log, and nothing made after; it opens as
// a store; a destination that exists or lies inside the store is refused.
func TestCheckpoint(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	s := openT(t, Options{Dir: dir, foldAt: 4 << 10}) // small fold threshold: some entries folded, some not
	appendN(t, s, 0, 300, "before")
	want := contents(t, s, 3)
	backup := filepath.Join(root, "backups", "b1")
	if err := s.Checkpoint(context.Background(), backup); err != nil {
		t.Fatal(err)
	}
	// The store's directory and the copy, with the parent it created, are
	// private: they hold SCRAM credentials.
	for _, d := range []string{dir, filepath.Dir(backup), backup} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", d, fi.Mode().Perm(), err)
		}
	}
	appendN(t, s, 300, 400, "after")
	after := contents(t, s, 3)
	if err := s.Checkpoint(context.Background(), backup); err == nil {
		t.Error("a checkpoint into an existing directory succeeded")
	}
	if err := s.Checkpoint(context.Background(), filepath.Join(dir, "inside")); err == nil || !strings.Contains(err.Error(), "inside the store directory") {
		t.Errorf("a checkpoint inside the store directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var size int64
	filepath.Walk(backup, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			size += fi.Size()
		}
		return nil
	})
	if size > 4<<20 {
		t.Errorf("the checkpoint of a tiny store takes %d bytes", size)
	}
	c := openT(t, Options{Dir: backup})
	got := contents(t, c, 3)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("checkpoint holds %d records, want the %d from before it", len(got), len(want))
	}
	// It is a store of its own: it takes appends, and the original keeps
	// what it had.
	appendN(t, c, 400, 410, "restored")
	c.Close()
	s = openT(t, Options{Dir: dir})
	defer s.Close()
	if fmt.Sprint(contents(t, s, 3)) != fmt.Sprint(after) {
		t.Error("the original changed")
	}
}

// TestCheckpointFailureLeavesTheStoreServing: a write that fails in the
// checkpoint's directory (a full or read-only backup disk) fails the
// Checkpoint call only; the store is not failed, and the partial copy has
// no marker, so Open refuses it.
func TestCheckpointFailureLeavesTheStoreServing(t *testing.T) {
	mem := vfs.NewMem()
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasPrefix(op.Path, "/backup/") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.ENOSPC
		}
		return nil
	}))
	s := openT(t, Options{Dir: "/store", fs: fs, foldAt: 4 << 10})
	defer s.Close()
	appendN(t, s, 0, 100, "v")
	if err := s.Checkpoint(context.Background(), "/backup/b1"); err == nil {
		t.Fatal("a checkpoint onto a full disk succeeded")
	}
	select {
	case <-s.Failed():
		t.Fatalf("the store failed with its checkpoint: %v", s.Err())
	default:
	}
	appendN(t, s, 100, 110, "still")
	if got := contents(t, s, 3); got["1/k100"] != "still" {
		t.Errorf("append after the failed checkpoint: %q", got["1/k100"])
	}
	// pebble removes what it copied when a checkpoint fails; whatever may
	// be left has no marker and is not taken for a store.
	if _, err := mem.Stat("/backup/b1"); err == nil {
		if c, err := Open(Options{Dir: "/backup/b1", fs: mem, Logger: discard}); err == nil {
			c.Close()
			t.Error("the partial checkpoint opened as a store")
		}
	}
}

// TestWALFillOnlyInTheStore: the WAL files a checkpoint copies elsewhere are
// not filled ahead, nor are their write failures the store's.
func TestWALFillOnlyInTheStore(t *testing.T) {
	fs := walFillFS{dir: "/store"}
	for name, want := range map[string]bool{"/store/000012.log": true, "/store/000012.sst": false,
		"/backup/000012.log": false, "/store2/000012.log": false, "/store/../backup/000012.log": false} {
		if fs.fills(name) != want {
			t.Errorf("fills(%s) = %v", name, !want)
		}
	}
	if !within("/store", "/store") || !within("/store", "/store/x/y") || within("/store", "/storex") || within("/store", "/") {
		t.Error("within")
	}
}

// TestCheckpointPrivateWhileWritten: the copy's directory is private (0700)
// from its creation, not only once it is complete: a directory readable by
// others while the tables are linked and the WAL copied let another local
// user open the files (SCRAM credentials among them) and keep them open
// after a later chmod. Every file created in the copy finds it private.
func TestCheckpointPrivateWhileWritten(t *testing.T) {
	root := t.TempDir()
	backups := filepath.Join(root, "backups")
	if err := os.Mkdir(backups, 0o755); err != nil { // an existing --backup-dir keeps its mode
		t.Fatal(err)
	}
	backup := filepath.Join(backups, "b1")
	var seen []string
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpCreate && within(backup, op.Path) {
			if fi, err := os.Stat(backup); err == nil && fi.Mode().Perm() != 0o700 {
				seen = append(seen, fmt.Sprintf("%s created in a directory of mode %v", filepath.Base(op.Path), fi.Mode().Perm()))
			}
		}
		return nil
	}))
	s := openT(t, Options{Dir: filepath.Join(root, "data"), fs: fs})
	defer s.Close()
	appendN(t, s, 0, 50, "v")
	if err := s.Checkpoint(context.Background(), backup); err != nil {
		t.Fatal(err)
	}
	if len(seen) > 0 {
		t.Errorf("the copy was readable by others while it was written: %v", seen)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v (%v), want 0700", backup, fi.Mode().Perm(), err)
	}
}

// TestCheckpointMarkerFailureRemovesTheCopy: a backup disk that fills up
// only when the marker is written (the tables and log fitted) fails the
// Checkpoint, and the copy, which can never be opened without its marker, is
// removed as the engine removes one that failed earlier, rather than left
// taking the backup disk's space.
func TestCheckpointMarkerFailureRemovesTheCopy(t *testing.T) {
	mem := vfs.NewMem()
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasPrefix(op.Path, "/backup/") && strings.HasSuffix(op.Path, markerName+".tmp") &&
			op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.ENOSPC
		}
		return nil
	}))
	s := openT(t, Options{Dir: "/store", fs: fs})
	defer s.Close()
	appendN(t, s, 0, 20, "v")
	if err := s.Checkpoint(context.Background(), "/backup/b1"); err == nil {
		t.Fatal("a checkpoint whose marker could not be written succeeded")
	}
	if names, err := mem.List("/backup/b1"); err == nil {
		t.Errorf("the copy without its marker was left: %v", names)
	}
	select {
	case <-s.Failed():
		t.Fatalf("the store failed with its checkpoint: %v", s.Err())
	default:
	}
}

// TestCheckpointCutShortIsExplained: a copy cut short (a crash or kill
// during a backup, before its marker) is refused, and the refusal says what
// it most likely is, whatever point the copy had reached: it used to call a
// cohort backup "a pebble database created by another program", or, cut
// before the engine's MANIFEST was copied, give no hint at all.
func TestCheckpointCutShortIsExplained(t *testing.T) {
	root := t.TempDir()
	s := openT(t, Options{Dir: filepath.Join(root, "data"), memTableSize: 64 << 10})
	appendN(t, s, 0, 300, "v")
	if err := s.Checkpoint(context.Background(), filepath.Join(root, "full")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	names := dirNames(t, filepath.Join(root, "full"))
	for stage, keep := range map[string]func(string) bool{
		"all but the marker": func(n string) bool { return n != markerName },
		"before the manifest": func(n string) bool {
			return strings.HasPrefix(n, "OPTIONS-") || strings.HasPrefix(n, "marker.format-version.")
		},
	} {
		dir := filepath.Join(root, strings.ReplaceAll(stage, " ", "-"))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !keep(n) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(root, "full", n))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Open(Options{Dir: dir, Logger: discard})
		if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "backup cut short") {
			t.Errorf("%s: Open = %v, want ErrNotStore saying it may be a backup cut short", stage, err)
		}
	}
}

// racingFS runs race after the first read of a WAL file while armed: the
// moment a Checkpoint copying the live WAL has read its first block, as if
// the copy were held up there while the store went on writing.
type racingFS struct {
	vfs.FS
	armed atomic.Bool
	race  func()
}

func (fs *racingFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil || !isWAL(name) || !fs.armed.Load() {
		return f, err
	}
	return &racingFile{File: f, fs: fs}, nil
}

type racingFile struct {
	vfs.File
	fs *racingFS
}

func (f *racingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	if f.fs.armed.CompareAndSwap(true, false) {
		f.fs.race()
	}
	return n, err
}

// TestCheckpointWhileWritesGoOn: appends that land while a Checkpoint copies
// the live WAL do not damage the copy. The store's WAL files are filled with
// zeros ahead of the engine's writes (walFillFS), so the copy, reading the
// file a block at a time, read zeros past the last record, and then, the
// writes having gone on, records further on: a gap that the engine, on
// opening the copy, took for damage (the records after it promise that the
// bytes before them were synced), so the backup could not be restored
// ("zeroed chunk ... replaying wal"). The copy of a WAL being written now
// ends where its writes had got to when the copy began.
func TestCheckpointWhileWritesGoOn(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	fs := &racingFS{FS: vfs.Default}
	s := openT(t, Options{Dir: dir, fs: fs})
	appendN(t, s, 0, 10, "v")
	// Reopened, the store writes a new WAL in the engine's current format,
	// whose chunks carry the offset synced so far.
	s.Close()
	s = openT(t, Options{Dir: dir, fs: fs})
	defer s.Close()
	appendN(t, s, 10, 20, "w")
	want := contents(t, s, 3)
	late := strings.Repeat("x", 1<<10)
	fs.race = func() {
		for i := range 200 {
			if err := s.Append(context.Background(), 1, []store.Record{rec(fmt.Sprintf("late%03d", i), late)}); err != nil {
				t.Error(err)
				return
			}
		}
	}
	fs.armed.Store(true)
	backup := filepath.Join(root, "backup")
	if err := s.Checkpoint(context.Background(), backup); err != nil {
		t.Fatal(err)
	}
	if fs.armed.Load() {
		t.Fatal("the checkpoint read no WAL file: the test did not race it")
	}
	c, err := Open(Options{Dir: backup, Logger: discard})
	if err != nil {
		t.Fatalf("a checkpoint taken while appends went on does not open: %v", err)
	}
	defer c.Close()
	got := contents(t, c, 3)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the checkpoint lost %s = %q acknowledged before it (has %q)", k, v, got[k])
		}
	}
}

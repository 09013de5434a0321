package disk

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lockWatchFS notes whether the store's lock is held when its LOCK file is
// removed.
type lockWatchFS struct {
	vfs.FS
	held           bool
	removed        bool
	removedWhileOn bool
}

type lockWatchCloser struct {
	io.Closer
	fs *lockWatchFS
}

func (c lockWatchCloser) Close() error {
	c.fs.held = false
	return c.Closer.Close()
}

func (f *lockWatchFS) Lock(name string) (io.Closer, error) {
	c, err := f.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	f.held = true
	return lockWatchCloser{c, f}, nil
}

func (f *lockWatchFS) Remove(name string) error {
	if filepath.Base(name) == "LOCK" {
		f.removed, f.removedWhileOn = true, f.held
	}
	return f.FS.Remove(name)
}

// A refused Open of a directory that is not a store removes the LOCK file
// it made while it still holds the lock. Removed after the lock was let
// go, a process that took the lock in between (on the file about to be
// unlinked) and one that then made a new LOCK file would both hold the
// directory.
func TestRefusedOpenRemovesLockWhileHeld(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := &lockWatchFS{FS: vfs.Default}
	_, err := Open(Options{Dir: dir, fs: fs})
	if !errors.Is(err, ErrNotStore) {
		t.Fatalf("Open = %v, want ErrNotStore", err)
	}
	if !fs.removed {
		t.Fatal("the LOCK file of the refused Open was not removed")
	}
	if !fs.removedWhileOn {
		t.Fatal("the LOCK file was removed after the lock was let go")
	}
	if fs.held {
		t.Fatal("the refused Open still holds the lock")
	}
}

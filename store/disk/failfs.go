package disk

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// failStopFS wraps the filesystem pebble writes through and turns the first
// failed write-path operation (write, sync, preallocate, create, rename,
// link, close of a written file) into a store-wide failure.
//
// Why: pebble treats a failed WAL write or sync, a failed MANIFEST update or
// a failed WAL rotation as fatal and panics or calls Logger.Fatalf, in
// whichever goroutine happened to hit it (often a background one). Neither
// may take down the coordinator process, and after a failed fsync the
// kernel may have dropped the dirty pages, so retrying the sync can report
// success for data that is gone. So instead of returning the error to
// pebble, the wrapper records it (Store.fail), which makes every waiting and
// later Append/Load return ErrStorage, and parks the pebble goroutine that
// hit it forever. No sync can succeed after that point, so nothing written
// after the failure is ever acknowledged; what was acknowledged before it is
// on disk and is recovered from the WAL when the process restarts.
//
// Until armed (during Open) errors are passed through unchanged so that
// pebble.Open can report them; the first is kept (refused), so that Open
// knows the disk refused a write whatever the error's number.
//
// Only the store's own files count: a failed write elsewhere (a Checkpoint
// into a full or read-only backup directory) is an ordinary error of that
// call, and the store goes on.
type failStopFS struct {
	vfs.FS
	dir    string // the store directory, cleaned
	armed  atomic.Bool
	onFail func(error)
	// openRefused is the first write-path failure before the wrapper was
	// armed (during Open).
	openRefused atomic.Pointer[error]

	// wals are the store's WAL files open for writing, by name: a read
	// of one (a Checkpoint's copy) stops where the writes had got to when
	// it was opened (see Open).
	walsMu sync.Mutex
	wals   map[string]*failStopFile
}

// check reports err if it is nil, the wrapper is not armed yet or name is
// outside the store directory, and otherwise records the failure and never
// returns. Before it is armed it keeps the first failure (see refused):
// the Open is then the wrapper's only user, so a failure outside the store
// directory (the engine syncs its parent directory) is the Open's too.
func (fs *failStopFS) check(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if !fs.armed.Load() {
		refused := fmt.Errorf("%s %s: %w", op, name, err)
		fs.openRefused.CompareAndSwap(nil, &refused)
		return err
	}
	if !within(fs.dir, name) {
		return err
	}
	fs.onFail(fmt.Errorf("%s %s: %w", op, name, err))
	select {} // park: see the type comment.
}

// refused is the first write, sync, creation or rename that failed while
// the store was opening, or nil.
func (fs *failStopFS) refused() error {
	if p := fs.openRefused.Load(); p != nil {
		return *p
	}
	return nil
}

// within reports whether name is dir or a path under it (dir cleaned).
func within(dir, name string) bool {
	name = filepath.Clean(name)
	return name == dir || strings.HasPrefix(name, dir+string(filepath.Separator))
}

func (fs *failStopFS) wrap(f vfs.File, name string) vfs.File {
	if f == nil {
		return nil
	}
	return &failStopFile{File: f, fs: fs, name: name}
}

// wrapWAL wraps a file the engine writes from its start (Create,
// ReuseForWrite) and, if it is a WAL of the store, registers it in fs.wals
// until it is closed.
func (fs *failStopFS) wrapWAL(f vfs.File, name string) vfs.File {
	if f == nil || !isWAL(name) || !within(fs.dir, name) {
		return fs.wrap(f, name)
	}
	ff := &failStopFile{File: f, fs: fs, name: name, wal: true}
	fs.walsMu.Lock()
	if fs.wals == nil {
		fs.wals = map[string]*failStopFile{}
	}
	fs.wals[filepath.Clean(name)] = ff
	fs.walsMu.Unlock()
	return ff
}

// Open opens name for reading. A WAL file of the store that is being
// written is read only up to where its writes had got to: a Checkpoint
// copies the live WAL while the engine goes on appending to it, and the
// file holds more than was written (walFillFS writes zeros ahead; a
// recycled file holds an older log). Read to its end, the copy could get
// zeros (or the older log) at one offset and, the writes having gone on
// meanwhile, records further on: a gap that the engine, opening the copy,
// takes for damage, since those records say that the bytes before them
// were synced. Cut where the writes were, the copy ends as a crash would
// leave the log: whole records, then at most one torn one. Every write
// acknowledged before the Checkpoint began is before that point (it syncs
// the WAL first).
func (fs *failStopFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	var writer *failStopFile
	if isWAL(name) && within(fs.dir, name) {
		fs.walsMu.Lock()
		writer = fs.wals[filepath.Clean(name)]
		fs.walsMu.Unlock()
	}
	var upTo int64
	if writer != nil {
		// Before the open: whatever is written by then is in the file.
		upTo = writer.writtenTo()
	}
	f, err := fs.FS.Open(name, opts...)
	if err != nil || writer == nil {
		return f, err
	}
	return &limitedFile{File: f, n: upTo}, nil
}

func (fs *failStopFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err = fs.check("create", name, err); err != nil {
		return nil, err
	}
	return fs.wrapWAL(f, name), nil
}

func (fs *failStopFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if err = fs.check("open for write", name, err); err != nil {
		return nil, err
	}
	return fs.wrap(f, name), nil
}

func (fs *failStopFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	// A directory handle is only written through Sync (making renames and
	// creations durable), which must not fail silently either.
	return fs.wrap(f, name), nil
}

func (fs *failStopFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	if err = fs.check("reuse for write", newname, err); err != nil {
		return nil, err
	}
	return fs.wrapWAL(f, newname), nil
}

func (fs *failStopFS) Link(oldname, newname string) error {
	return fs.check("link", newname, fs.FS.Link(oldname, newname))
}

func (fs *failStopFS) Rename(oldname, newname string) error {
	return fs.check("rename", newname, fs.FS.Rename(oldname, newname))
}

// MkdirAll creates the directories the engine asks for private (0700)
// whatever mode it asks (0755): a Checkpoint's copy holds what the store
// holds, SCRAM credentials included, and was readable by everyone from its
// creation until it was complete, long enough for another local user to
// open its files and keep them. A directory that exists keeps its mode.
func (fs *failStopFS) MkdirAll(dir string, _ os.FileMode) error {
	return fs.check("mkdir", dir, fs.FS.MkdirAll(dir, 0o700))
}

func (fs *failStopFS) Unwrap() vfs.FS { return fs.FS }

// failStopFile applies failStopFS.check to the write-path methods of a file.
// Reads pass through: a failed read is reported by pebble as an error to the
// reader (Load) or retried in the background, never silently ignored.
type failStopFile struct {
	vfs.File
	fs      *failStopFS
	name    string
	written atomic.Bool
	wal     bool // a WAL file of the store: registered in fs.wals until closed

	mu  sync.Mutex
	off int64 // where the next Write goes
	end int64 // the end of what was written, by Write or WriteAt
}

// writtenTo is the end of what was written to the file so far.
func (f *failStopFile) writtenTo() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.end
}

func (f *failStopFile) Write(p []byte) (int, error) {
	f.written.Store(true)
	n, err := f.File.Write(p)
	f.mu.Lock()
	f.off += int64(n)
	f.end = max(f.end, f.off)
	f.mu.Unlock()
	return n, f.fs.check("write", f.name, err)
}

func (f *failStopFile) WriteAt(p []byte, off int64) (int, error) {
	f.written.Store(true)
	n, err := f.File.WriteAt(p, off)
	f.mu.Lock()
	f.end = max(f.end, off+int64(n))
	f.mu.Unlock()
	return n, f.fs.check("write", f.name, err)
}

func (f *failStopFile) Preallocate(off, n int64) error {
	return f.fs.check("preallocate", f.name, f.File.Preallocate(off, n))
}

func (f *failStopFile) Sync() error { return f.fs.check("sync", f.name, f.File.Sync()) }

func (f *failStopFile) SyncData() error { return f.fs.check("sync", f.name, f.File.SyncData()) }

func (f *failStopFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.fs.check("sync", f.name, err)
}

func (f *failStopFile) Close() error {
	if f.wal {
		f.fs.walsMu.Lock()
		if k := filepath.Clean(f.name); f.fs.wals[k] == f {
			delete(f.fs.wals, k)
		}
		f.fs.walsMu.Unlock()
	}
	err := f.File.Close()
	if f.written.Load() {
		return f.fs.check("close", f.name, err)
	}
	return err
}

// limitedFile reads a file only up to n bytes (failStopFS.Open).
type limitedFile struct {
	vfs.File
	n   int64
	off int64 // of the next Read
}

func (f *limitedFile) Read(p []byte) (int, error) {
	if f.off >= f.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), f.n-f.off)]
	n, err := f.File.Read(p)
	f.off += int64(n)
	return n, err
}

func (f *limitedFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.n {
		return 0, io.EOF
	}
	short := int64(len(p)) > f.n-off
	if short {
		p = p[:f.n-off]
	}
	n, err := f.File.ReadAt(p, off)
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// pebbleLogger routes pebble's log lines to slog. Fatalf, which pebble calls
// when it cannot continue (a failed MANIFEST write, an internal invariant),
// fails the store and parks the calling goroutine instead of exiting the
// process; see failStopFS for why parking is safe.
type pebbleLogger struct {
	log    *slog.Logger
	onFail func(error)
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.onFail(fmt.Errorf("pebble: %s", fmt.Sprintf(format, args...)))
	select {}
}

package disk

import (
	"errors"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFillMax is the largest step by which a new WAL file is filled ahead of
// pebble's writes (smaller when the memtable, and so the WAL, is smaller).
// Each step stalls the WAL writer while it is written and synced; the stall
// grows faster than the step (BenchmarkWALFillStep: ~0.4 ms for 256 KiB,
// 1.3–3.7 ms for 1 MiB on the development VM), and with 256 KiB steps 16
// concurrent appenders saw a lower p99 than with 1 MiB.
const walFillMax = 256 << 10

// walFillFS makes the fsyncs of a new write-ahead log as cheap as those of a
// recycled one.
//
// Why: every acknowledged commit waits for an fdatasync of the WAL. When a
// write extends the file, the sync must also persist the new size and block
// allocation; when it overwrites blocks that were already written and
// synced, it persists only the data. BenchmarkWALSync measures both: on the
// development VM the second costs about half the wall and CPU time of the
// first (fallocate's unwritten extents, which pebble asks for, save little).
// Pebble reuses the files of old WALs for this reason, but only once a
// memtable has been flushed: after every start the first WAL files (~35 MB
// each with the default memtable) are written fresh.
//
// walFillFS therefore writes zeros ahead of pebble's writes to every WAL file
// it creates, a step at a time, and syncs them, so pebble's own writes and
// syncs land in blocks that are already allocated and written. Pebble's WAL
// reader treats zeros after the last record as the end of the log (the case
// it documents for preallocated files): a clean end for a closed WAL, a torn
// tail (tolerated for the newest WAL) after a crash. Zeros are only ever
// written beyond every byte pebble has written, so no record is overwritten.
// A reused (recycled) WAL file is written up to its old length, and filled
// from there.
type walFillFS struct {
	vfs.FS
	step int64
	dir  string // the store directory, cleaned ("": any): a Checkpoint's copies of WAL files are not filled
}

// isWAL reports whether name is one of pebble's WAL files ("000012.log").
// The store directory holds nothing else with that suffix.
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

// fills reports whether the file name is filled ahead: a WAL of the store
// directory, not a Checkpoint's copy of one.
func (fs walFillFS) fills(name string) bool {
	return isWAL(name) && (fs.dir == "" || within(fs.dir, name))
}

func (fs walFillFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !fs.fills(name) {
		return f, err
	}
	return &filledFile{File: f, step: fs.step}, nil
}

// ReuseForWrite wraps a recycled WAL file too: its old length is already
// written, but pebble recycles the files of WALs of any size (the first
// memtables are small), so a new WAL often outgrows the file it reuses.
func (fs walFillFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	if err != nil || !fs.fills(newname) {
		return f, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &filledFile{File: f, step: fs.step, filled: fi.Size()}, nil
}

func (fs walFillFS) Unwrap() vfs.FS { return fs.FS }

// filledFile is a WAL file whose bytes up to filled are written and synced.
type filledFile struct {
	vfs.File
	step int64

	mu     sync.Mutex
	off    int64 // where the next Write goes (pebble writes sequentially)
	filled int64 // written and synced up to here; beyond every byte written
	zeros  []byte
}

// fill makes sure that [0, to) is allocated, written and synced, writing
// zeros from filled on, a step at a time. It is called with mu held.
func (f *filledFile) fill(to int64) error {
	if to <= f.filled {
		return nil
	}
	if f.zeros == nil {
		f.zeros = make([]byte, f.step)
	}
	for f.filled < to {
		// A file system may scramble the buffers it was given (pebble's
		// MemFS does in invariant builds): never write anything but zeros.
		clear(f.zeros)
		if _, err := f.File.WriteAt(f.zeros, f.filled); err != nil {
			return err
		}
		f.filled += f.step
	}
	return f.File.SyncData()
}

func (f *filledFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fill(f.off + int64(len(p))); err != nil {
		return 0, err
	}
	n, err := f.File.Write(p)
	f.off += int64(n)
	return n, err
}

func (f *filledFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fill(off + int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// Preallocate does nothing: fill reserves the space, written, which is what
// makes the syncs cheap (pebble's fallocate leaves unwritten extents).
func (f *filledFile) Preallocate(off, n int64) error { return nil }

package disk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/cohort-dev/cohort/store"
)

// TestOpenOnFullDiskFails: an Open whose recovery must write tables (the
// crash left a log tail to flush and fold) on a disk that is still full
// fails with ErrStorage instead of retrying for ever: the process neither
// served nor exited (a supervisor saw it alive), burned a core and wrote
// thousands of warnings a second.
//
// Every refusal counts, not only a full disk: a file over the process's
// file size limit (RLIMIT_FSIZE, systemd's LimitFSIZE=) fails with EFBIG,
// and a file the process may not write with EACCES; both used to be
// retried for ever as well.
func TestOpenOnFullDiskFails(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EFBIG, syscall.EACCES} {
		t.Run(errno.Error(), func(t *testing.T) { openOnFullDisk(t, errno) })
	}
}

func openOnFullDisk(t *testing.T, errno syscall.Errno) {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	s := openT(t, Options{Dir: "/s", fs: mem, memTableSize: 1 << 20})
	v := strings.Repeat("x", 200)
	for i := range 3000 {
		if err := s.Append(ctx, int32(i%4), []store.Record{rec(fmt.Sprint("k", i%500), v)}); err != nil {
			t.Fatal(err)
		}
	}
	image := mem.CrashClone(vfs.CrashCloneCfg{}) // the log tail not folded or flushed
	_ = s.Close()

	var diskFull atomic.Bool
	diskFull.Store(true)
	// Space comes back at the end, so that the engine's own goroutines,
	// still retrying after Open gave up, finish instead of spinning for the
	// rest of the test binary (a process would have exited).
	defer diskFull.Store(false)
	full := errorfs.Wrap(image, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !diskFull.Load() || !strings.HasSuffix(op.Path, ".sst") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate:
			return errno
		}
		return nil
	}))
	done := make(chan error, 1)
	go func() {
		r, err := Open(Options{Dir: "/s", fs: full, Logger: discard, memTableSize: 1 << 20})
		if err == nil {
			_ = r.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStorage) && !(errno == syscall.EACCES && errors.Is(err, ErrNotWritable)) {
			t.Fatalf("Open on a full disk: %v, want ErrStorage", err)
		}
	case <-time.After(60 * time.Second): // a hang detector, not a timing claim
		t.Fatal("Open on a full disk did not return")
	}
}

// TestOpenRefusedWriteAdvice: an Open that fails because the disk refused
// one of its writes (full, over the file size limit, an I/O error), whether
// the engine returns the error or treats it as fatal, says so and says to
// start again once the disk takes writes, never to restore a backup or move
// the store aside to start empty: the store is not damaged, and following
// that advice would drop every committed offset for a full disk.
func TestOpenRefusedWriteAdvice(t *testing.T) {
	ctx := context.Background()
	kinds := map[string][]errorfs.OpKind{
		"create": {errorfs.OpCreate},
		"write":  {errorfs.OpFileWrite, errorfs.OpFileWriteAt},
		"sync":   {errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo},
	}
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EFBIG, syscall.EIO, syscall.EACCES} {
		for name, ops := range kinds {
			t.Run(name+" "+errno.Error(), func(t *testing.T) {
				mem := vfs.NewCrashableMem()
				s := openT(t, Options{Dir: "/s", fs: mem})
				if err := s.Append(ctx, 0, []store.Record{rec("k", "v")}); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				refusing := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
					if slices.Contains(ops, op.Kind) && !strings.HasSuffix(op.Path, "LOCK") {
						return errno
					}
					return nil
				}))
				r, err := Open(Options{Dir: "/s", fs: refusing, Logger: discard})
				if err == nil {
					_ = r.Close()
					t.Fatal("Open succeeded with every " + name + " refused")
				}
				msg := err.Error()
				if errno == syscall.EACCES {
					// Not the disk: the permissions, said as when the
					// directory itself is not writable.
					if !errors.Is(err, ErrNotWritable) || !strings.Contains(msg, "permissions") || strings.Contains(msg, "move it aside") {
						t.Fatalf("Open: %v\nwant ErrNotWritable naming the permissions", err)
					}
				} else if !errors.Is(err, ErrStorage) || !strings.Contains(msg, errno.Error()) ||
					!strings.Contains(msg, "refused a write") || !strings.Contains(msg, "start cohort again") ||
					strings.Contains(msg, "move it aside") || strings.Contains(msg, "until the process restarts") {
					t.Fatalf("Open: %v\nwant ErrStorage naming %q, saying the disk refused a write and to start cohort again, "+
						"without the advice for damage", err, errno.Error())
				}
				// Started again once the disk takes writes (a new process:
				// what the failed Open left synced), the store opens, whole.
				s = openT(t, Options{Dir: "/s", fs: mem.CrashClone(vfs.CrashCloneCfg{})})
				defer s.Close()
				var got []string
				if err := s.Load(ctx, 0, func(r store.Record) error {
					got = append(got, string(r.Key)+"="+string(r.Value))
					return nil
				}); err != nil || !slices.Equal(got, []string{"k=v"}) {
					t.Fatalf("after the disk took writes again: %v, %v", got, err)
				}
			})
		}
	}
}

// TestOpenRefusedLogWriteFailsOpen: Open folds the record log a crash left
// without waiting for a sync, so the engine writes that fold to its new WAL
// in the background. When the disk refused that write (a WAL file over the
// process's file size limit, seen with a real RLIMIT_FSIZE), Open returned
// a store whose WAL writer kept the error: every Append failed without the
// store failing (the node served on, refusing every write, instead of
// stopping), and Close then crashed the process in the engine's WAL rotation.
// Open must fail instead, and a start once the disk takes writes must find
// everything.
func TestOpenRefusedLogWriteFailsOpen(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EFBIG, syscall.ENOSPC} {
		t.Run(errno.Error(), func(t *testing.T) {
			ctx := context.Background()
			mem := vfs.NewCrashableMem()
			s := openT(t, Options{Dir: "/s", fs: mem, memTableSize: 1 << 20})
			for i := range 200 {
				if err := s.Append(ctx, int32(i%4), []store.Record{rec(fmt.Sprint("k", i), "v")}); err != nil {
					t.Fatal(err)
				}
			}
			image := mem.CrashClone(vfs.CrashCloneCfg{}) // the log tail not folded
			_ = s.Close()

			refusing := errorfs.Wrap(image, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt) {
					return errno
				}
				return nil
			}))
			r, err := Open(Options{Dir: "/s", fs: refusing, Logger: discard, memTableSize: 1 << 20})
			if err == nil {
				// Not closed: the engine's Close panics on its broken WAL.
				aerr := r.Append(ctx, 0, []store.Record{rec("after", "v")})
				t.Fatalf("Open succeeded though the disk refused its WAL writes; then Append: %v; store failed: %v", aerr, r.Err())
			}
			if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "refused a write") {
				t.Fatalf("Open: %v, want ErrStorage saying the disk refused a write", err)
			}
			s = openT(t, Options{Dir: "/s", fs: image.CrashClone(vfs.CrashCloneCfg{}), memTableSize: 1 << 20})
			defer s.Close()
			n := 0
			for p := range int32(4) {
				if err := s.Load(ctx, p, func(store.Record) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if n != 200 {
				t.Fatalf("after the disk took writes again: %d records, want 200", n)
			}
		})
	}
}

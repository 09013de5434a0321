package disk

import (
	"context"
	"errors"
	"fmt"
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
		if !errors.Is(err, ErrStorage) {
			t.Fatalf("Open on a full disk: %v, want ErrStorage", err)
		}
	case <-time.After(60 * time.Second): // a hang detector, not a timing claim
		t.Fatal("Open on a full disk did not return")
	}
}

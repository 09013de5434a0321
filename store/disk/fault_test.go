package disk

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/cohort-dev/cohort/store"
)

// TestWriteFailureFailsStore makes the filesystem fail (a full disk, or
// fsync reporting an I/O error) while writers append concurrently, and
// checks that: the writers get errors wrapping ErrStorage (and do not hang);
// the store then refuses Append, Load and Compact; and after a "restart"
// (a crash image of what was synced) every acknowledged Append is there.
func TestWriteFailureFailsStore(t *testing.T) {
	faults := map[string]func(errorfs.Op) error{
		"disk full": func(op errorfs.Op) error {
			switch op.Kind {
			case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate, errorfs.OpCreate:
				return syscall.ENOSPC
			}
			return nil
		},
		// Only new files fail (say, out of inodes): the WAL keeps working
		// until the memtable fills and pebble must create the next WAL,
		// which pebble itself treats as fatal (it panics).
		"create fails": func(op errorfs.Op) error {
			if op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpReuseForWrite {
				return syscall.ENOSPC
			}
			return nil
		},
		"fsync EIO": func(op errorfs.Op) error {
			switch op.Kind {
			case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
				return syscall.EIO
			}
			return nil
		},
		// The file system remounted read-only (as ext4 does after an I/O
		// error): the way out is the mount, not free space.
		"read-only": func(op errorfs.Op) error {
			switch op.Kind {
			case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate, errorfs.OpCreate:
				return syscall.EROFS
			}
			return nil
		},
	}
	for name, fault := range faults {
		advice := "free space on its file system"
		if name == "read-only" {
			advice = "the file system is not read-only"
		}
		t.Run(name, func(t *testing.T) {
			for seed := int64(0); seed < 4; seed++ {
				writeFailureRound(t, seed, fault, advice, false)
			}
		})
		// The coordinator's path: StartMulti, several writes in flight.
		t.Run(name+", pipelined", func(t *testing.T) {
			for seed := int64(0); seed < 4; seed++ {
				writeFailureRound(t, seed, fault, advice, true)
			}
		})
	}
}

// writeFailureRound appends from several writers until the fault starts,
// then checks the store's failure, whose error must carry advice.
func writeFailureRound(t *testing.T, seed int64, fault func(errorfs.Op) error, advice string, pipelined bool) {
	rng := rand.New(rand.NewSource(seed))
	mem := vfs.NewCrashableMem()
	var on atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !on.Load() {
			return nil
		}
		return fault(op)
	}))
	const dir = "/store"
	s := openT(t, Options{Dir: dir, fs: fs, memTableSize: 64 << 10})
	select {
	case <-s.Failed():
		t.Fatalf("seed %d: Failed closed before any fault: %v", seed, s.Err())
	default:
	}

	const writers = 6
	threshold := int64(10 + rng.Intn(300))
	var acks atomic.Int64
	ws := make([]*crashWriter, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &crashWriter{id: i, p: int32(i % 5), pipelined: pipelined}
		wg.Add(1)
		go func(i int, seed int64) {
			defer wg.Done()
			// Append until the store fails; the fault starts after
			// `threshold` acknowledged Appends in total.
			errs[i] = ws[i].runUntilError(s, rand.New(rand.NewSource(seed)), func() {
				if acks.Add(1) == threshold {
					on.Store(true)
				}
			})
		}(i, rng.Int63())
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrStorage) {
			t.Fatalf("seed %d: writer %d stopped with %v, want an error wrapping ErrStorage", seed, i, err)
		}
	}
	// The failure is signalled to whoever watches the store (node stops).
	select {
	case <-s.Failed():
	default:
		t.Fatalf("seed %d: the store refuses writes but Failed is not closed", seed)
	}
	if err := s.Err(); !errors.Is(err, ErrStorage) {
		t.Fatalf("seed %d: Err() = %v, want an error wrapping ErrStorage", seed, err)
	}
	// cohort serve exits with this error: it names the refused write and
	// says what lets the next start succeed, as a start on that disk does.
	if msg := s.Err().Error(); !strings.Contains(msg, "the disk refused a write") || !strings.Contains(msg, dir) ||
		!strings.Contains(msg, advice) || !strings.Contains(msg, "then start cohort again") ||
		strings.Contains(msg, "move it aside") {
		t.Fatalf("seed %d: Err() = %v, want it to say the disk refused a write to %s, and %q, then start cohort "+
			"again", seed, msg, dir, advice)
	}
	ctx := context.Background()
	if err := s.Append(ctx, 0, []store.Record{rec("after", "failure")}); !errors.Is(err, ErrStorage) {
		t.Fatalf("Append after the failure = %v, want ErrStorage", err)
	}
	if err := s.Load(ctx, 0, func(store.Record) error { return nil }); !errors.Is(err, ErrStorage) {
		t.Fatalf("Load after the failure = %v, want ErrStorage", err)
	}
	if err := s.Compact(ctx); !errors.Is(err, ErrStorage) {
		t.Fatalf("Compact after the failure = %v, want ErrStorage", err)
	}
	if err := s.Close(); !errors.Is(err, ErrStorage) {
		t.Fatalf("Close of a failed store = %v, want ErrStorage", err)
	}

	// Restart from what the disk holds.
	r := openT(t, Options{Dir: dir, fs: mem.CrashClone(vfs.CrashCloneCfg{})})
	defer r.Close()
	got := make([]map[int]int, writers)
	for i := range got {
		got[i] = map[int]int{}
	}
	for p := int32(0); p < 5; p++ {
		err := r.Load(ctx, p, func(rec store.Record) error {
			var w, k int
			if _, err := fmt.Sscanf(string(rec.Key), "w%d-k%d", &w, &k); err != nil || w < 0 || w >= writers {
				return fmt.Errorf("unexpected key %q", rec.Key)
			}
			got[w][k] = crashParse(w, string(rec.Value))
			return nil
		})
		if err != nil {
			t.Fatalf("seed %d: Load(%d) after restart: %v", seed, p, err)
		}
	}
	for _, w := range ws {
		if err := w.check(w.acked, got[w.id]); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}

// runUntilError is crashWriter.run without a context: it appends until an
// Append fails and returns that error. A pipelined writer keeps
// pipelineDepth StartMulti calls unacknowledged, as crashWriter.run does,
// and returns the first error of a StartMulti or a wait (the waits of the
// writes still in flight are called too, but not counted as acknowledged).
func (w *crashWriter) runUntilError(s *Store, rng *rand.Rand, onAck func()) error {
	var pending []startedOp
	defer func() {
		for _, op := range pending {
			_ = op.wait()
		}
	}()
	for {
		n := 1 + rng.Intn(4)
		op := crashOp{}
		for _, k := range rng.Perm(crashKeysPerWriter)[:n] {
			op.keys = append(op.keys, k)
			op.del = append(op.del, rng.Intn(5) == 0)
		}
		w.mu.Lock()
		w.ops = append(w.ops, op)
		seq := len(w.ops)
		w.mu.Unlock()
		recs := make([]store.Record, n)
		for i, k := range op.keys {
			recs[i].Key = []byte(crashKey(w.id, k))
			if !op.del[i] {
				recs[i].Value = crashValue(w.id, seq)
			}
		}
		if !w.pipelined {
			if err := s.Append(context.Background(), w.p, recs); err != nil {
				return err
			}
			w.ack(seq, onAck)
			continue
		}
		wait, err := s.StartMulti(context.Background(), []store.PartitionRecords{{Partition: w.p, Records: recs}})
		if err != nil {
			return err
		}
		pending = append(pending, startedOp{seq, wait})
		for len(pending) > pipelineDepth {
			op := pending[0]
			pending = pending[1:]
			if err := op.wait(); err != nil {
				return err
			}
			w.ack(op.seq, onAck)
		}
	}
}

func rec(k, v string) store.Record { return store.Record{Key: []byte(k), Value: []byte(v)} }

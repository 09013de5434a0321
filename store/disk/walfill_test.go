package disk

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cohort-dev/cohort/store"
)

// syncCountFS counts SyncData calls on the files it creates.
type syncCountFS struct {
	vfs.FS
	syncs atomic.Int64
}

func (fs *syncCountFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return &syncCountFile{File: f, fs: fs}, nil
}

func (fs *syncCountFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, err
	}
	return &syncCountFile{File: f, fs: fs}, nil
}

type syncCountFile struct {
	vfs.File
	fs *syncCountFS
}

func (f *syncCountFile) SyncData() error {
	f.fs.syncs.Add(1)
	return f.File.SyncData()
}

func readAll(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWALFillWritesZerosAheadOnly writes a WAL in random pieces and checks
// after each that the file holds exactly what was written, followed by zeros
// up to the next whole step, that filling syncs once per step crossed (and
// not for writes inside the filled part), and that other files pass through.
func TestWALFillWritesZerosAheadOnly(t *testing.T) {
	const step = 4096
	counter := &syncCountFS{FS: vfs.NewMem()}
	fs := walFillFS{FS: counter, step: step}

	f, err := fs.Create("000007.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	var want []byte
	steps := 0
	for len(want) < 10*step {
		p := make([]byte, 1+rng.Intn(step*3/2))
		rng.Read(p)
		// Appended first: pebble's MemFS scrambles written buffers in
		// invariant (race) builds to catch callers that reuse them.
		want = append(want, p...)
		before := counter.syncs.Load()
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
		needed := (len(want) + step - 1) / step
		if needed > steps {
			if got := counter.syncs.Load() - before; got != 1 {
				t.Fatalf("write reaching step %d synced %d times, want once", needed, got)
			}
			steps = needed
		} else if got := counter.syncs.Load() - before; got != 0 {
			t.Fatalf("write inside the filled part synced %d times", got)
		}
		got := readAll(t, counter, "000007.log")
		if len(got) != steps*step {
			t.Fatalf("after %d bytes the file has %d, want %d (whole steps)", len(want), len(got), steps*step)
		}
		if !bytes.Equal(got[:len(want)], want) {
			t.Fatalf("after %d bytes the file does not hold what was written", len(want))
		}
		if bytes.ContainsFunc(got[len(want):], func(r rune) bool { return r != 0 }) {
			t.Fatalf("after %d bytes the filled tail is not all zeros", len(want))
		}
	}
	// Preallocation is left to the fill: it must not change the file.
	if err := f.Preallocate(0, 64*step); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, counter, "000007.log"); len(got) != steps*step {
		t.Fatalf("Preallocate changed the size to %d", len(got))
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// Not a WAL: written as is.
	g, err := fs.Create("000008.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Write([]byte("table")); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if got := readAll(t, counter, "000008.sst"); string(got) != "table" {
		t.Fatalf("sstable holds %q", got)
	}
}

// TestWALFillReusedFile checks that a recycled WAL file is filled too, from
// its old length on: pebble recycles the files of small WALs (its first
// memtables are small) for larger ones, which then outgrew them unfilled.
func TestWALFillReusedFile(t *testing.T) {
	const step = 4096
	counter := &syncCountFS{FS: vfs.NewMem()}
	fs := walFillFS{FS: counter, step: step}
	old, err := fs.Create("000007.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Write(bytes.Repeat([]byte{7}, step+100)); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	const oldSize = 2 * step // filled to whole steps

	f, err := fs.ReuseForWrite("000007.log", "000009.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	// Inside the old length: written as is, no fill, no sync. (Written from
	// copies: pebble's MemFS scrambles written buffers in race builds.)
	first := bytes.Repeat([]byte{9}, step)
	before := counter.syncs.Load()
	if _, err := f.Write(bytes.Clone(first)); err != nil {
		t.Fatal(err)
	}
	if got := counter.syncs.Load() - before; got != 0 {
		t.Fatalf("write inside the reused file's old length synced %d times", got)
	}
	if got := readAll(t, counter, "000009.log"); len(got) != oldSize || !bytes.Equal(got[:step], first) {
		t.Fatalf("after a write inside the old length: %d bytes (want %d), first step rewritten: %v", len(got), oldSize, bytes.Equal(got[:step], first))
	}
	// Past it: filled with zeros to the next whole step, synced once.
	second := bytes.Repeat([]byte{9}, step+10)
	if _, err := f.Write(bytes.Clone(second)); err != nil {
		t.Fatal(err)
	}
	if got := counter.syncs.Load() - before; got != 1 {
		t.Fatalf("write past the reused file's old length synced %d times, want once", got)
	}
	got := readAll(t, counter, "000009.log")
	want := append(append([]byte{}, first...), second...)
	if len(got) != oldSize+step || !bytes.Equal(got[:len(want)], want) {
		t.Fatalf("after a write past the old length: %d bytes (want %d), data intact: %v", len(got), oldSize+step, bytes.Equal(got[:len(want)], want))
	}
	if bytes.ContainsFunc(got[len(want):], func(r rune) bool { return r != 0 }) {
		t.Fatal("the tail past the old length is not all zeros")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWALFillReopen writes through a synced store, checks that its WAL was
// filled ahead, and reopens a copy of the directory taken while the store
// was still open (as after a crash: the WAL ends in zeros, not in pebble's
// end-of-log trailer) to find every record.
func TestWALFillReopen(t *testing.T) {
	mem := vfs.NewMem()
	const dir = "/store"
	s := openT(t, Options{Dir: dir, fs: mem})
	defer s.Close()
	const n = 300
	for i := 0; i < n; i++ {
		rec := store.Record{Key: fmt.Appendf(nil, "key-%04d", i), Value: fmt.Appendf(nil, "value-%d", i)}
		if err := s.Append(t.Context(), 1, []store.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	names, err := mem.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	copyFS := vfs.NewMem()
	if err := copyFS.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wals := 0
	for _, name := range names {
		if name == "LOCK" {
			continue
		}
		b := readAll(t, mem, mem.PathJoin(dir, name))
		if isWAL(name) && len(b) > 0 {
			if len(b)%walFillMax != 0 || b[len(b)-1] != 0 {
				t.Fatalf("WAL %s: %d bytes, not filled ahead to a whole step of %d", name, len(b), walFillMax)
			}
			wals++
		}
		f, err := copyFS.Create(copyFS.PathJoin(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if wals == 0 {
		t.Fatal("no WAL written")
	}
	r := openT(t, Options{Dir: dir, fs: copyFS})
	defer r.Close()
	got := 0
	if err := r.Load(t.Context(), 1, func(rec store.Record) error { got++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("reopened copy holds %d records, want %d", got, n)
	}
}

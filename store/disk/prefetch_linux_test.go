package disk

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestPrefetchTablesReadsAhead: a table whose pages are not in the page
// cache is in it soon after prefetchTables, without anything reading it.
func TestPrefetchTablesReadsAhead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "000001.sst")
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Clean pages (synced) can be dropped from the cache on request.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	resident := func() float64 {
		vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return float64(n) / float64(len(vec))
	}
	if r := resident(); r > 0.5 {
		t.Skipf("this file system kept %.0f%% of the file's pages after being asked to drop them", 100*r)
	}
	prefetchTables(dir)
	// The reads were started, not waited for: allow the disk time to
	// finish them (bounded), checking without touching the mapping.
	deadline := time.Now().Add(20 * time.Second)
	for resident() < 0.9 {
		if time.Now().After(deadline) {
			t.Fatalf("%.0f%% of the table's pages in the page cache 20 s after prefetching it", 100*resident())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

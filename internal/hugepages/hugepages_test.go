//go:build linux && (amd64 || arm64)

package hugepages

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestReadMode(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ text, want string }{
		{"always [madvise] never\n", "madvise"},
		{"[always] madvise never\n", "always"},
		{"always madvise [never]\n", "never"},
	} {
		p := filepath.Join(dir, "enabled")
		os.WriteFile(p, []byte(c.text), 0o644)
		if got, err := readMode(p); err != nil || got != c.want {
			t.Errorf("readMode(%q) = %q, %v; want %q", c.text, got, err, c.want)
		}
	}
	os.WriteFile(filepath.Join(dir, "bad"), []byte("always madvise never"), 0o644)
	if got, err := readMode(filepath.Join(dir, "bad")); err == nil {
		t.Errorf("readMode without brackets = %q, nil; want an error", got)
	}
	if got, err := readMode(filepath.Join(dir, "missing")); err != nil || got != "" {
		t.Errorf("readMode of a missing file = %q, %v; want \"\", nil (no THP in the kernel)", got, err)
	}
}

func TestHeapRun(t *testing.T) {
	maps := []byte(`00400000-005a0000 r-xp 00000000 08:01 1234  /usr/bin/cohort
005a0000-005d6000 rw-p 001a0000 08:01 1234  /usr/bin/cohort
005d6000-005f0000 rw-p 00000000 00:00 0 
c000000000-c000400000 rw-p 00000000 00:00 0 
c000400000-c004000000 rw-p 00000000 00:00 0 [anon: Go: heap]
c004000000-c008000000 rw-p 00000000 00:00 0 
c008000000-c00c000000 ---p 00000000 00:00 0 
c00c000000-c00e000000 rw-p 00000000 00:00 0 
7f0000000000-7f0000100000 rw-p 00000000 00:00 0 [heap]
7f0000100000-7f0000200000 rw-p 00000000 00:00 0 
7ffc807f0000-7ffc80811000 rw-p 00000000 00:00 0                          [stack]
not a mapping line
`)
	for _, c := range []struct {
		addr   uintptr
		lo, hi uintptr
		ok     bool
	}{
		{0xc000000010, 0xc000000000, 0xc008000000, true}, // three adjacent pieces, named or not
		{0xc007ffffff, 0xc000000000, 0xc008000000, true},
		{0xc00c000000, 0xc00c000000, 0xc00e000000, true},       // after the PROT_NONE gap: a run of its own
		{0xc008000000, 0, 0, false},                            // reserved, not mapped writable
		{0x00500000, 0, 0, false},                              // the program's text
		{0x005a0010, 0, 0, false},                              // file-backed data
		{0x005d6000, 0x005d6000, 0x005f0000, true},             // anonymous after file data: not joined to it
		{0x7f0000100000, 0x7f0000100000, 0x7f0000200000, true}, // [heap] (brk) is not joined
		{0x7f0000000010, 0, 0, false},
		{0x7ffc807f0010, 0, 0, false},
		{0x1000, 0, 0, false},
	} {
		lo, hi, ok := heapRun(maps, c.addr)
		if lo != c.lo || hi != c.hi || ok != c.ok {
			t.Errorf("heapRun(%#x) = %#x-%#x %v; want %#x-%#x %v", c.addr, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
}

// smapsOf returns the VmFlags and AnonHugePages (kB) of the mapping that
// holds addr, from /proc/self/smaps.
func smapsOf(t *testing.T, addr uintptr) (flags []string, hugeKB int, found bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	in := false
	for sc.Scan() {
		line := sc.Text()
		if m, ok := parseMapping([]byte(line)); ok && strings.Contains(strings.Fields(line)[0], "-") {
			in = addr >= m.lo && addr < m.hi
			continue
		}
		if !in {
			continue
		}
		found = true
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			hugeKB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			flags = strings.Fields(v)
		}
	}
	return flags, hugeKB, found
}

// TestEnable checks on this machine that the heap's mappings carry the
// advice after Enable, also the mappings the heap adds after it.
func TestEnable(t *testing.T) {
	st, stop, err := Enable(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if st.Mode != "madvise" {
		t.Skipf("transparent huge pages are %q here: nothing to advise", st.Mode)
	}
	if st.Reserved != 256<<20 || st.Advised < st.Reserved {
		t.Fatalf("Enable = %+v; want 256 MiB reserved and at least that advised", st)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapReleased < uint64(st.Reserved)/2 {
		t.Errorf("HeapReleased %d MiB after reserving %d MiB: the reserve is counted as heap in use", ms.HeapReleased>>20, st.Reserved>>20)
	}
	b := make([]byte, 64<<20) // reuses the reserve: advised
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	flags, huge, found := smapsOf(t, addr)
	if !found || !contains(flags, "hg") {
		t.Fatalf("the mapping holding a heap buffer has VmFlags %v; want hg (MADV_HUGEPAGE)", flags)
	}
	t.Logf("64 MiB buffer touched: its mapping has %d MiB in huge pages", huge>>10)
	runtime.KeepAlive(b)

	// Grow the heap past the reserve: the new mappings are advised after a
	// collection (by the finalizer, which runs asynchronously).
	var grow [][]byte
	for range 6 {
		grow = append(grow, make([]byte, 128<<20))
	}
	last := uintptr(unsafe.Pointer(unsafe.SliceData(grow[len(grow)-1])))
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		if flags, _, found := smapsOf(t, last); found && contains(flags, "hg") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("heap grown past the reserve: its newest mapping has VmFlags %v after 20 s of collections; want hg", flags)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(grow)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

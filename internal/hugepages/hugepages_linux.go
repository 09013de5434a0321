//go:build linux

package hugepages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

const madvHugePage = 14 // MADV_HUGEPAGE, <asm-generic/mman-common.h>

// Enable advises the Go heap to use transparent huge pages when the
// system's mode is "madvise": it maps reserve bytes of heap address space
// ahead (none when reserve ≤ 0, or when the system refuses to overcommit
// memory: there an untouched mapping still counts against the limit; at
// most half the runtime's memory limit),
// advises every heap mapping, and keeps advising the ones the heap adds,
// after each garbage collection, until stop is called. Under any other
// mode it does nothing and says why in Status.Mode.
func Enable(reserve int64) (st Status, stop func(), err error) {
	stop = func() {}
	st.Mode, err = readMode("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || st.Mode != "madvise" {
		return st, stop, err
	}
	if strict, _ := os.ReadFile("/proc/sys/vm/overcommit_memory"); bytes.Equal(bytes.TrimSpace(strict), []byte("2")) {
		reserve = 0
	}
	// Under a memory limit (GOMEMLIMIT) the buffer, live for a moment,
	// must not push the collector past it.
	if limit := debug.SetMemoryLimit(-1); reserve > limit/2 {
		reserve = limit / 2
	}
	// The address of a heap object: the heap's mappings are those around it.
	// Go never unmaps heap memory, so the address stays inside the heap
	// after the object is gone.
	var anchor uintptr
	if reserve > 0 {
		b := make([]byte, reserve)
		anchor = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		runtime.KeepAlive(b)
		st.Reserved = reserve
	} else {
		b := make([]byte, 64<<10) // a large object: it sits in the heap's arenas
		anchor = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		runtime.KeepAlive(b)
	}
	a := &adviser{anchor: anchor}
	if err := a.advise(); err != nil {
		return st, stop, err
	}
	if reserve > 0 {
		// Free the buffer and give its (never touched) pages back, so that
		// the runtime counts them as released, not as heap in use.
		debug.FreeOSMemory()
	}
	st.Advised = a.advised.Load()
	a.watch()
	var once sync.Once
	return st, func() { once.Do(func() { a.stopped.Store(true) }) }, nil
}

// adviser advises the heap's mappings around anchor.
type adviser struct {
	anchor  uintptr
	mu      sync.Mutex
	lo, hi  uintptr // the range advised last
	advised atomic.Int64
	stopped atomic.Bool
}

// advise finds the run of adjacent writable anonymous mappings holding
// anchor (the heap: the runtime maps it in growing, adjacent pieces) and
// advises it whole if it changed since the last call.
func (a *adviser) advise() error {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	lo, hi, ok := heapRun(maps, a.anchor)
	if !ok {
		return fmt.Errorf("hugepages: no writable anonymous mapping holds the heap address %#x", a.anchor)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if lo == a.lo && hi == a.hi {
		return nil
	}
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, madvHugePage); e != 0 {
		return fmt.Errorf("hugepages: madvise(MADV_HUGEPAGE) of the heap: %w", e)
	}
	a.lo, a.hi = lo, hi
	a.advised.Store(int64(hi - lo))
	return nil
}

// sentinel is an object whose finalizer runs after each garbage
// collection that finds it unreachable; it is big enough not to be
// combined with others by the tiny allocator (whose finalizers may never
// run).
type sentinel struct {
	a *adviser
	_ [2]uintptr // size only
}

// watch advises the heap again after each garbage collection: the heap
// grows between collections, and a growth beyond the advised mappings
// adds mappings without the advice.
func (a *adviser) watch() {
	s := &sentinel{a: a}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.a.stopped.Load() {
			return
		}
		s.a.advise() // best effort: a failure leaves 4 KiB pages, nothing worse
		s.a.watch()
	})
}

// readMode returns the bracketed word of a transparent_hugepage setting
// file, e.g. "madvise" from "always [madvise] never".
func readMode(path string) (string, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", nil // a kernel without transparent huge pages
	}
	if err != nil {
		return "", err
	}
	if i := bytes.IndexByte(b, '['); i >= 0 {
		if j := bytes.IndexByte(b[i:], ']'); j > 0 {
			return string(b[i+1 : i+j]), nil
		}
	}
	return "", fmt.Errorf("hugepages: unexpected %s: %q", path, bytes.TrimSpace(b))
}

// mapping is one line of /proc/self/maps.
type mapping struct {
	lo, hi uintptr
	anonRW bool // private, readable and writable, not backed by a file
}

// heapRun returns the range of the run of adjacent anonymous read-write
// mappings that holds addr, from the text of /proc/self/maps.
func heapRun(maps []byte, addr uintptr) (lo, hi uintptr, ok bool) {
	var ms []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		m, ok := parseMapping(sc.Bytes())
		if !ok {
			continue
		}
		ms = append(ms, m)
	}
	for i, m := range ms {
		if addr < m.lo || addr >= m.hi {
			continue
		}
		if !m.anonRW {
			return 0, 0, false
		}
		j, k := i, i
		for j > 0 && ms[j-1].anonRW && ms[j-1].hi == ms[j].lo {
			j--
		}
		for k+1 < len(ms) && ms[k+1].anonRW && ms[k+1].lo == ms[k].hi {
			k++
		}
		return ms[j].lo, ms[k].hi, true
	}
	return 0, 0, false
}

// parseMapping parses "lo-hi perms offset dev inode [path]".
func parseMapping(line []byte) (mapping, bool) {
	f := bytes.Fields(line)
	if len(f) < 5 {
		return mapping{}, false
	}
	dash := bytes.IndexByte(f[0], '-')
	if dash < 0 {
		return mapping{}, false
	}
	lo, err1 := strconv.ParseUint(string(f[0][:dash]), 16, 64)
	hi, err2 := strconv.ParseUint(string(f[0][dash+1:]), 16, 64)
	if err1 != nil || err2 != nil || hi <= lo {
		return mapping{}, false
	}
	perms := f[1]
	anon := string(f[4]) == "0" && (len(f) == 5 || bytes.HasPrefix(f[5], []byte("[anon")))
	return mapping{lo: uintptr(lo), hi: uintptr(hi),
		anonRW: anon && len(perms) == 4 && perms[0] == 'r' && perms[1] == 'w' && perms[3] == 'p'}, true
}

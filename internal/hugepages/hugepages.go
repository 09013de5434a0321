// Package hugepages asks Linux to back the Go heap with transparent huge
// pages (2 MiB) on systems that leave the choice to each program
// (/sys/kernel/mm/transparent_hugepage/enabled set to "madvise", the
// default of many distributions).
//
// Why: the Go runtime maps its heap in 4 KiB pages there, and every page is
// faulted in on first touch. Loading a coordinator's state after a restart
// touches hundreds of MiB of fresh heap; on virtual machines where a page
// fault is expensive (docs/benchmarks.md measured 16–22 µs per 4 KiB page
// on the CI machine) the faults were half of the load's CPU time, and with
// huge pages the same load took half the time. The JVM offers the same
// choice (-XX:+UseTransparentHugePages); so does cohort serve
// (--heap-huge-pages, on by default).
//
// How: the runtime never unmaps heap memory, so Enable first maps heap
// address space ahead (it allocates and drops one large untouched buffer:
// virtual memory, no resident pages) and advises every heap mapping it
// finds with madvise(MADV_HUGEPAGE); after each garbage collection it
// advises the heap mappings added since. The cost is the usual one of huge
// pages: a partly used 2 MiB page is resident whole, and a fault may wait for
// the kernel to compact memory into a free huge page.
package hugepages

// Status is what Enable found and did.
type Status struct {
	// Mode is the system's transparent huge page setting: "always",
	// "madvise", "never", or "" where it is unknown (not Linux). Only
	// "madvise" needs advice; under "always" the heap gets huge pages
	// anyway and under "never" it cannot.
	Mode string
	// Reserved is how many bytes of heap address space were mapped ahead.
	Reserved int64
	// Advised is how many bytes of heap mappings carry the advice.
	Advised int64
}

// DefaultReserve is the heap address space Enable maps ahead by default:
// enough for the state of ~15M committed offsets. It costs address space,
// not memory: no page of it is resident until the heap uses it.
const DefaultReserve = 1 << 30

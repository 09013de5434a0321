package disk

import (
	"os"
	"path/filepath"
	"strings"
)

// prefetchMax bounds the bytes of tables Open asks the kernel to read ahead:
// a store larger than that gets its first prefetchMax bytes of tables read
// ahead, and the rest is read as the loads reach it.
const prefetchMax = 1 << 30

// prefetchTables asks the kernel to start reading the store's tables into
// its page cache (posix_fadvise WILLNEED) and returns without waiting for the
// reads. After a machine restart the files come from the disk: the
// partitions' loads, which scan every table, then find the blocks read or in
// flight instead of waiting for each in turn (a load from a cold cache took
// a tenth longer than from a warm one; docs/benchmarks.md). Best effort:
// a file that cannot be opened or advised is skipped. Called in the
// background by Open for a store on the real file system.
func prefetchTables(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var files []tableFile
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.Type().IsRegular() {
			files = append(files, tableFile{e.Name(), info.Size()})
		}
	}
	for _, name := range tablesToPrefetch(files, prefetchMax) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		_ = adviseWillNeed(f)
		_ = f.Close()
	}
}

// tableFile is a file of the store's directory and its size.
type tableFile struct {
	name string
	size int64
}

// tablesToPrefetch picks the tables (*.sst) among files, in the order given,
// while their total size stays within budget.
func tablesToPrefetch(files []tableFile, budget int64) []string {
	var names []string
	for _, f := range files {
		if !strings.HasSuffix(f.name, ".sst") || f.size > budget {
			continue
		}
		budget -= f.size
		names = append(names, f.name)
	}
	return names
}

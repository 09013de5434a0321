package disk

import (
	"os"

	"golang.org/x/sys/unix"
)

// adviseWillNeed tells the kernel that all of f will be read soon, so that it
// starts reading it into the page cache.
func adviseWillNeed(f *os.File) error {
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_WILLNEED)
}

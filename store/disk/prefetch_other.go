//go:build !linux

package disk

import "os"

// adviseWillNeed does nothing where posix_fadvise is not used.
func adviseWillNeed(*os.File) error { return nil }

//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package main

import (
	"io"
	"os"
)

// isTerminal reports whether r may be a terminal. Without a terminal ioctl
// here, any character device counts: /dev/null is then refused too, and
// --password-file is the way out.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

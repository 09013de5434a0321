//go:build unix

package testport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// held keeps the lock files of the ports this process was given open: a
// lock lasts until the process exits.
var held []*os.File

// lockPort takes an exclusive, non-blocking lock on port p's file; false if
// another process holds it. Where the lock directory cannot be used, every
// port counts as free (the listen check alone, as before).
func lockPort(p int) bool {
	dir := filepath.Join(os.TempDir(), "cohort-testport")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	held = append(held, f)
	return true
}

//go:build unix

package bench

import (
	"fmt"
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) this process has used so far.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// RaiseFileLimit raises the soft RLIMIT_NOFILE to at least need (up to the
// hard limit) and fails if that is not enough.
func RaiseFileLimit(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("reading the file descriptor limit: %w", err)
	}
	// The fields are uint64 on Linux and int64 on the BSDs.
	if uint64(lim.Cur) >= uint64(need) {
		return nil
	}
	if uint64(lim.Max) < uint64(need) {
		return fmt.Errorf("need %d file descriptors, the hard limit is %d (raise it with ulimit -Hn)", need, lim.Max)
	}
	setLimit(&lim.Cur, need)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raising the file descriptor limit to %d: %w", need, err)
	}
	return nil
}

// setLimit sets an Rlimit field, whichever integer type the platform gives it.
func setLimit[T int64 | uint64](f *T, n int) { *f = T(n) }

//go:build unix

package console

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used (user and system): with
// the wall time of a request it tells the request's own work from the
// waits for a core of a busy machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

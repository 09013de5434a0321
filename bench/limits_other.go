//go:build !unix

package bench

import "time"

// processCPU is not measured where there is no getrusage.
func processCPU() (time.Duration, bool) { return 0, false }

// RaiseFileLimit does nothing where there is no RLIMIT_NOFILE.
func RaiseFileLimit(need int) error { return nil }

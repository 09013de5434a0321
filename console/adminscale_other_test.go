//go:build !unix

package console

import "time"

// processCPU is not measured here (see adminscale_unix_test.go).
func processCPU() time.Duration { return 0 }

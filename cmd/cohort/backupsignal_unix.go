//go:build !windows && !plan9

package main

import (
	"os"
	"syscall"
)

// backupSignal asks cohort serve for a backup (--backup-dir).
var backupSignal os.Signal = syscall.SIGUSR1

//go:build !windows && !plan9

package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// backupSignal asks cohort serve for a backup (--backup-dir).
var backupSignal os.Signal = syscall.SIGUSR1

// exitBySignal ends the process by sg with its default action, as if it had
// never been caught (a supervisor sees the same exit as without cohort's
// handler).
func exitBySignal(sg os.Signal) {
	if s, ok := sg.(syscall.Signal); ok {
		signal.Reset(s)
		_ = syscall.Kill(syscall.Getpid(), s)
		time.Sleep(time.Second) // the signal ends the process first
	}
	os.Exit(1)
}

//go:build windows || plan9

package main

import "os"

// backupSignal is nil where there is no SIGUSR1: no backup on a signal.
var backupSignal os.Signal

// exitBySignal ends the process after a stop signal during the start.
func exitBySignal(os.Signal) { os.Exit(1) }

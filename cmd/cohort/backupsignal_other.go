//go:build windows || plan9

package main

import "os"

// backupSignal is nil where there is no SIGUSR1: no backup on a signal.
var backupSignal os.Signal

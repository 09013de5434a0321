//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package main

import "golang.org/x/sys/unix"

// ioctlReadTermios reads a terminal's settings on the BSDs and macOS.
const ioctlReadTermios = unix.TIOCGETA

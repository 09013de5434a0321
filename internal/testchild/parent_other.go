//go:build !linux

package testchild

import "os/exec"

// killWithParent does nothing where the kernel has no parent-death signal:
// a child outlives a test binary killed mid-run (the test's cleanup still
// kills it when the test ends normally).
func killWithParent(*exec.Cmd) {}

package testchild

import (
	"os/exec"
	"syscall"
)

// killWithParent has the kernel kill the child when this process dies, so a
// test binary killed mid-run leaves no child holding a port or a store.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

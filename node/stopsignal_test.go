//go:build linux

package node

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/internal/testready"
)

// TestSIGTERMStopsWhileAReloadHangs: cohort serve stops on SIGTERM while a
// SIGHUP reload is stuck reading its certificate file (here a named pipe
// nobody writes to, as a file on a hung network mount would be), with a
// SIGUSR1 sent in between. The stop signal used to share one channel of
// one slot with SIGHUP and SIGUSR1, read by the loop that ran the reload:
// it was never read while the reload hung, and dropped outright when
// another signal already waited in the slot.
func TestSIGTERMStopsWhileAReloadHangs(t *testing.T) {
	bin := cohortBinary(t)
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "cohort")
	addr := freePort(t)
	serve := exec.Command(bin, "serve", "--listeners", "SSL://"+addr, "--data-dir", t.TempDir(), "--log-level", "info",
		"--tls-cert-file", pair.CertFile, "--tls-key-file", pair.KeyFile)
	logs := &logTail{}
	serve.Stdout, serve.Stderr = os.Stderr, logs
	cmd := testready.Start(t, serve, childReadyWithin)
	// The certificate file becomes a pipe: opening it blocks until a writer
	// opens it, which this test does only at its end (releasing the reload,
	// whatever happened).
	fifo := pair.CertFile
	defer func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Whichever of these the old loop took first, it then hung in the
	// reload with the stop signal unread or dropped.
	cmd.Process.Signal(syscall.SIGHUP)
	cmd.Process.Signal(syscall.SIGUSR1)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-cmd.Exited():
		if exitErr := cmd.Wait(); exitErr != nil {
			t.Fatalf("exit after SIGTERM: %v", exitErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("cohort serve did not exit within 20s of SIGTERM while a SIGHUP reload hung")
	}
	if !logs.has("stopped cleanly") {
		t.Error(`no "stopped cleanly" logged`)
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/store"
)

// TestEtcdPasswordFileReadableWarns: the CLI warns when a password file of
// its connection can be read by other users of the machine
// (TestWarnsAboutReadableSecretFiles), but the etcd password file of
// `cohort store copy` and `cohort serve` got no such word: a 0644
// --etcd-password-file went unremarked. Both now warn, naming the file and
// never its content; a 0600 file gets no warning.
func TestEtcdPasswordFileReadableWarns(t *testing.T) {
	const pass = "etcd-secret-7f3a"
	open := writeTemp(t, "open-pw", pass+"\n")
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	private := writeTemp(t, "private-pw", pass+"\n")
	want := "holds a secret and other users of this machine can read it: chmod 600 "
	dir := diskStore(t, map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("1")}}})

	c := cli{t: t}
	for _, file := range []string{open, private} {
		// No etcd listens there: the copy fails (exit 1) after the
		// checks of its flags.
		_, errOut, code := c.run("store", "copy", "--from-data-dir", dir, "--to-etcd", closedAddr(t),
			"--etcd-user", "cohort", "--etcd-password-file", file, "--timeout", "1s")
		if code == 0 {
			t.Fatalf("store copy to an unreachable etcd exited 0:\n%s", errOut)
		}
		if strings.Contains(errOut, pass) {
			t.Fatalf("the password in the output:\n%s", errOut)
		}
		warned := strings.Contains(errOut, "cohort: warning: "+file+" "+want+file)
		if warned != (file == open) {
			t.Errorf("store copy --etcd-password-file %s: warned %v, want %v:\n%s", filepath.Base(file), warned, file == open, errOut)
		}
	}

	for _, file := range []string{open, private} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := cohortCommand(ctx, t, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "d"),
			"--etcd", closedAddr(t), "--etcd-user", "cohort", "--etcd-password-file", file, "--log-level", "warn")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		if err == nil {
			t.Fatalf("serve with an unreachable etcd exited 0:\n%s", stderr.String())
		}
		out := stderr.String()
		if strings.Contains(out, pass) {
			t.Fatalf("the password in the log:\n%s", out)
		}
		warned := strings.Contains(out, "level=WARN") && strings.Contains(out, "--etcd-password-file "+file+" "+want+file)
		if warned != (file == open) {
			t.Errorf("serve --etcd-password-file %s: warned %v, want %v:\n%s", filepath.Base(file), warned, file == open, out)
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEtcdPasswordFileBounded: --etcd-password-file is read up to a bound,
// as the TLS files are: a wrong path (a log, /dev/zero) fails with an
// error that says so, rather than being read whole into memory and its
// first line (perhaps the whole file) sent to etcd as the password. The
// error names the file and its size limit, not its content.
func TestEtcdPasswordFileBounded(t *testing.T) {
	t.Setenv("COHORT_ETCD_PASSWORD", "")
	os.Unsetenv("COHORT_ETCD_PASSWORD")
	p := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 1<<20)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pw, err := etcdPassword("cohort", p)
	if err == nil {
		t.Fatalf("a 1 MiB password file was read: a password of %d bytes", len(pw))
	}
	if msg := err.Error(); !strings.Contains(msg, p) || strings.Contains(msg, "xxxx") {
		t.Errorf("error %q: want it to name the file and not quote it", msg)
	}
}

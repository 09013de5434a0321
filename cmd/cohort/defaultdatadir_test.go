package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/store/disk"
)

// TestServeEtcdWarnsOfStoreInDefaultDataDir: an operator who first ran
// `cohort serve` (state in ./data, the default) and then starts cluster mode
// from the same directory, as the README's sections follow one another, got a
// cluster on etcd's empty state with no word about the groups and offsets left
// in ./data. A --data-dir given with --etcd is refused
// (TestServeEtcdWithStoreInDataDir), but the default cannot be: a node moved
// into etcd with `cohort store copy` may keep its old directory where it
// starts. So the start warns, naming the directory and the command that moves
// it; a working directory without a store gets no such line.
func TestServeEtcdWarnsOfStoreInDefaultDataDir(t *testing.T) {
	run := func(withStore bool) string {
		t.Helper()
		cwd := t.TempDir()
		if withStore {
			st, err := disk.Open(disk.Options{Dir: filepath.Join(cwd, "data"), NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// No etcd listens there: the start fails once the warnings are
		// logged, when the node dials it.
		cmd := cohortCommand(ctx, t, "serve", "--listen", "127.0.0.1:0", "--etcd", closedAddr(t), "--log-level", "warn")
		cmd.Dir = cwd
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil {
			t.Fatalf("serve with an unreachable etcd exited 0:\n%s", stderr.String())
		}
		if _, err := os.Stat(filepath.Join(cwd, "data")); !withStore && err == nil {
			t.Errorf("cluster mode created ./data")
		}
		return stderr.String()
	}
	const want = "./data holds an embedded store"
	out := run(true)
	var line string
	for l := range strings.Lines(out) {
		if strings.Contains(l, want) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("start in cluster mode beside a store in ./data: no warning %q; stderr:\n%s", want, out)
	}
	for _, w := range []string{"level=WARN", "cohort store copy"} {
		if !strings.Contains(line, w) {
			t.Errorf("warning %q does not hold %q", line, w)
		}
	}
	if out := run(false); strings.Contains(out, want) {
		t.Errorf("start in cluster mode without ./data warns of a store:\n%s", out)
	}
}

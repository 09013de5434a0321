package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/store/disk"
)

// A service's state directory (examples/systemd's /var/lib/cohort) holds
// the data directory in data/ and the backups in backups/: given as
// --from-data-dir, the refusal names the data directory inside it, and
// writes nothing into either.
func TestStoreCopySourceIsStateDir(t *testing.T) {
	state := t.TempDir()
	data := filepath.Join(state, "data")
	st, err := disk.Open(disk.Options{Dir: data})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(state, "backups"), 0o700); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(state)
	_, err = sourceDataDir(state, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		t.Fatal("a state directory holding data/ was taken as a data directory")
	}
	for _, want := range []string{
		"--from-data-dir " + state + " is not a cohort data directory",
		"its subdirectory data is one",
		"--from-data-dir " + data,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not say %q", err, want)
		}
	}
	if after, _ := os.ReadDir(state); len(after) != len(before) {
		t.Errorf("the refusal wrote into %s: %v", state, after)
	}

	// A directory with no store in it, nor in a subdirectory: no hint.
	empty := t.TempDir()
	_, err = sourceDataDir(empty, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || strings.Contains(err.Error(), "subdirector") {
		t.Fatalf("an empty directory: %v", err)
	}
}

package disk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenBackupDirSaysHowToRestore: restoring by hand, an operator pointed
// --data-dir at the --backup-dir itself, which holds the backups SIGUSR1
// wrote (cohort-<time> directories, each a store). The refusal said to
// "point the store at an empty or missing directory, or move the contents
// aside", as for any stray file, with no word that the directory holds
// backups. It now names one and says how a backup is restored: copied, and
// the copy started. The directory is left as it was.
func TestOpenBackupDirSaysHowToRestore(t *testing.T) {
	root := t.TempDir()
	s := openT(t, Options{Dir: filepath.Join(root, "data")})
	appendN(t, s, 0, 10, "v")
	backups := filepath.Join(root, "backups")
	name := "cohort-20261207T082926.099Z"
	if err := s.Checkpoint(context.Background(), filepath.Join(backups, name)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	_, err := Open(Options{Dir: backups})
	if !errors.Is(err, ErrNotStore) {
		t.Fatalf("Open(the backup directory) = %v, want ErrNotStore", err)
	}
	for _, want := range []string{name, "backup", "cp -a", "--data-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(the backup directory) = %q: does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "move the contents aside") {
		t.Errorf("Open(the backup directory) = %q: advises moving the backups aside", err)
	}
	entries, _ := os.ReadDir(backups)
	if len(entries) != 1 || entries[0].Name() != name {
		t.Errorf("the backup directory after the refused open: %v, want only %s", entries, name)
	}
	if _, err := os.Stat(filepath.Join(backups, markerName)); err == nil {
		t.Errorf("the refused open wrote %s into the backup directory", markerName)
	}
}

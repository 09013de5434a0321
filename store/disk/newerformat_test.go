package disk

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewerFormatSaysRunThatVersion: a store whose engine format is newer
// than this build reads (a newer cohort wrote it) is refused with advice to
// run that version or restore an older backup, not the damage advice (move
// it aside to start empty), which would lose it for nothing.
func TestNewerFormatSaysRunThatVersion(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, Options{Dir: dir})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(dir, "marker.format-version.*"))
	if err != nil || len(names) != 1 {
		t.Fatalf("format markers %v, %v", names, err)
	}
	// marker.format-version.<seq>.<version>: a version far ahead.
	i := strings.LastIndexByte(names[0], '.')
	if err := os.Rename(names[0], names[0][:i]+".999"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir, Logger: discard})
	if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "newer version of cohort") || strings.Contains(err.Error(), "start empty") {
		t.Fatalf("Open of a newer format: %v", err)
	}
}

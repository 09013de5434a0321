package disk

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDirBytes: the size a load's heap floor is computed from counts every
// file under the directory, and a directory not made yet is empty.
func TestDirBytes(t *testing.T) {
	dir := t.TempDir()
	if got := DirBytes(filepath.Join(dir, "missing")); got != 0 {
		t.Fatalf("missing directory: %d bytes, want 0", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "b"), make([]byte, 234), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := DirBytes(dir); got != 1234 {
		t.Fatalf("dirBytes = %d, want 1234", got)
	}
}

package disk

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// skipIfPermissionsIgnored skips a test that relies on permission bits when
// the process can write anyway (root, or CAP_DAC_OVERRIDE): it probes a
// read-only directory rather than guessing from the user id.
func skipIfPermissionsIgnored(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	probe := filepath.Join(dir, "probe")
	if f, err := os.Create(probe); err == nil {
		f.Close()
		os.Remove(probe)
		t.Skipf("this process can write in a 0555 directory (euid %d): permission bits cannot be tested here", os.Geteuid())
	}
}

// TestOpenNotWritable: a directory this process may not write in is
// reported as such, not as a lock held by another process.
func TestOpenNotWritable(t *testing.T) {
	skipIfPermissionsIgnored(t)
	check := func(t *testing.T, dir string, err error) {
		t.Helper()
		if !errors.Is(err, ErrNotWritable) || errors.Is(err, ErrLocked) {
			t.Fatalf("Open = %v, want ErrNotWritable (and not ErrLocked)", err)
		}
		if msg := err.Error(); strings.Contains(msg, "another cohort process") || !strings.Contains(msg, dir) ||
			!strings.Contains(msg, "permission denied") {
			t.Fatalf("message %q: want the directory and 'permission denied', no mention of another process", msg)
		}
	}
	t.Run("existing read-only directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
		_, err := Open(Options{Dir: dir})
		check(t, dir, err)
	})
	t.Run("missing directory under a read-only parent", func(t *testing.T) {
		parent := t.TempDir()
		if err := os.Chmod(parent, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(parent, 0o755)
		dir := filepath.Join(parent, "data")
		_, err := Open(Options{Dir: dir})
		check(t, dir, err)
	})
}

// TestLockErrorKinds pins the classification of lock failures, which runs
// everywhere (also as root): a lock file that cannot be created is a
// permission or storage problem; only a refused lock means another holder.
func TestLockErrorKinds(t *testing.T) {
	const lock = "/d/LOCK"
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"permission", &fs.PathError{Op: "open", Path: lock, Err: syscall.EACCES}, ErrNotWritable},
		{"read-only file system", &fs.PathError{Op: "open", Path: lock, Err: syscall.EROFS}, ErrNotWritable},
		{"I/O error", &fs.PathError{Op: "open", Path: lock, Err: syscall.EIO}, ErrStorage},
		{"lock held (EAGAIN)", syscall.EAGAIN, ErrLocked},
		{"lock held (EACCES from fcntl)", syscall.EACCES, ErrLocked},
		{"held by this process", errors.New("lock held by current process"), ErrLocked},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := lockError(lock, c.err)
			for _, kind := range []error{ErrNotWritable, ErrStorage, ErrLocked} {
				if errors.Is(got, kind) != (kind == c.want) {
					t.Fatalf("lockError(%v) = %v, want only %v", c.err, got, c.want)
				}
			}
		})
	}
}

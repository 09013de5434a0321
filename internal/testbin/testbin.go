// Package testbin builds commands of this module for tests that run them as
// child processes (to SIGKILL them, or to run them as a user would): each
// set of packages is built once per test binary, into a directory of its
// own under os.TempDir.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

type build struct {
	once sync.Once
	dir  string
	err  error
}

var (
	mu     sync.Mutex
	builds = map[string]*build{}
)

// Build compiles the packages (import paths) with `go build -o dir/`, once
// per test binary for the same list, and returns dir: each command is
// dir/<last element of its path>. It fails the test when the build fails.
func Build(t testing.TB, pkgs ...string) string {
	t.Helper()
	key := strings.Join(pkgs, " ")
	mu.Lock()
	b := builds[key]
	if b == nil {
		b = &build{}
		builds[key] = b
	}
	mu.Unlock()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "cohort-testbin"); b.err != nil {
			return
		}
		args := append([]string{"build", "-o", b.dir + string(filepath.Separator)}, pkgs...)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", key, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.dir
}

// Command builds the package at path (see Build) and returns its binary.
func Command(t testing.TB, path string) string {
	t.Helper()
	return filepath.Join(Build(t, path), filepath.Base(path))
}

// Cohort is the cohort command (cmd/cohort), built once per test binary.
func Cohort(t testing.TB) string {
	t.Helper()
	return Command(t, "github.com/cohort-dev/cohort/cmd/cohort")
}

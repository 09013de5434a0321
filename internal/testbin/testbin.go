// Package testbin builds commands of this module for tests that run them as
// child processes (to SIGKILL them, or to run them as a user would): each
// set of packages is built once per test binary, into a directory of its
// own under os.TempDir, removed when the tests end. A package that uses it
// runs its tests through Run:
//
//	func TestMain(m *testing.M) { os.Exit(testbin.Run(m)) }
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	// running is set by Run: the builds will be removed.
	running atomic.Bool
)

// Run runs the tests of m, then removes the directories Build made for
// them, and returns m.Run's exit code. The builds are shared by the tests
// of the binary, so no test's cleanup may remove them; the end of m.Run is
// the one place that outlives every user. Build fails the tests of a
// binary whose TestMain does not call Run, so that none leaves its builds
// behind. A binary that is killed, or panics (a -timeout reached),
// still leaves them.
func Run(m *testing.M) int {
	running.Store(true)
	defer removeBuilds()
	return m.Run()
}

// removeBuilds removes every directory Build made.
func removeBuilds() {
	mu.Lock()
	defer mu.Unlock()
	for key, b := range builds {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
		delete(builds, key)
	}
}

// Build compiles the packages (import paths) with `go build -o dir/`, once
// per test binary for the same list, and returns dir: each command is
// dir/<last element of its path>. It fails the test when the build fails.
func Build(t testing.TB, pkgs ...string) string {
	t.Helper()
	if !running.Load() {
		t.Fatal("testbin.Build: the package's TestMain must run its tests with testbin.Run, which removes the builds when they end")
	}
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

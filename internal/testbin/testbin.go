// Package testbin builds commands of this module for tests that run them as
// child processes (to SIGKILL them, or to run them as a user would): each
// set of packages is built once per test binary, into a directory of its
// own under os.TempDir (named after the binary's pid), removed when the
// tests end, or by a later run if the binary was killed first. A package that uses it
// runs its tests through Run:
//
//	func TestMain(m *testing.M) { os.Exit(testbin.Run(m)) }
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// behind. A binary that is killed, or panics (a -timeout reached), still
// leaves them; the next Run of any package removes those (sweep).
func Run(m *testing.M) int {
	sweep(os.TempDir())
	running.Store(true)
	defer removeBuilds()
	return m.Run()
}

// dirPrefix starts the name of every build directory; the pid of the test
// binary that made it follows, then a dash and MkdirTemp's random part.
const dirPrefix = "cohort-testbin-"

// sweep removes the build directories under tmp whose test binary has
// ended without removing them (killed, or a -timeout reached): those whose
// name carries the pid of a process that no longer exists. A directory of
// a running binary, this package's or another's, is left alone, as is any
// directory whose owner cannot be told from its name (made before names
// carried the pid). A pid reused since by another process keeps its dead
// owner's directory until that process ends too.
func sweep(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := ownerPid(e.Name())
		if !e.IsDir() || !ok || pid == os.Getpid() || processExists(pid) {
			continue
		}
		os.RemoveAll(filepath.Join(tmp, e.Name()))
	}
}

// ownerPid is the pid in a build directory's name.
func ownerPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, dirPrefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
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
		if b.dir, b.err = os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-"); b.err != nil {
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

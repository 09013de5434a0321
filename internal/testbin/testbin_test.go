package testbin

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childEnv marks the test binary run by TestBuildsRemovedAtExit as the
// child that builds.
const childEnv = "COHORT_TEST_TESTBIN_CHILD"

// TestBuildsRemovedAtExit: a test binary that builds commands with Build
// leaves none of its build directories behind when it ends. The test runs
// this test binary again as a child, with its own temporary directory
// ($TMPDIR), whose two tests build the same command (once: they share the
// directory); once the child has exited that directory holds no
// cohort-testbin* directory.
func TestBuildsRemovedAtExit(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the child runs TestBuildChild only")
	}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBuildChild", "-test.v", "-test.timeout=120s")
	cmd.Env = append(os.Environ(), childEnv+"=1", "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	// Both subtests ran and found the same built command.
	if n := strings.Count(string(out), "built "); n != 2 {
		t.Fatalf("child: %d builds reported, want 2:\n%s", n, out)
	}
	left, err := filepath.Glob(filepath.Join(tmp, "cohort-testbin*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the child left %d build directories behind: %v", len(left), left)
	}
}

// TestKilledRunsBuildsSwept: a test binary killed before its tests end (as
// by go test's -timeout) leaves its build directory; the next test binary
// that runs through Run removes it, and leaves alone the directories of
// binaries still running and those it cannot tell the owner of. The test
// runs this binary as a child that builds, says so and waits; kills it
// (SIGKILL, once it has said so, no sleeping); then runs a second child in
// the same $TMPDIR.
func TestKilledRunsBuildsSwept(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the child runs TestBuildChild only")
	}
	tmp := t.TempDir()
	// A directory of a running binary (this one, the parent of the
	// children) and one of an older naming, without a pid.
	alive := filepath.Join(tmp, dirPrefix+strconv.Itoa(os.Getpid())+"-1")
	unnamed := filepath.Join(tmp, "cohort-testbin123")
	for _, d := range []string{alive, unnamed} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	builds := func() []string {
		t.Helper()
		left, err := filepath.Glob(filepath.Join(tmp, "cohort-testbin*"))
		if err != nil {
			t.Fatal(err)
		}
		return left
	}

	killed := exec.Command(os.Args[0], "-test.run=^TestBuildChild$", "-test.v", "-test.timeout=120s")
	killed.Env = append(os.Environ(), childEnv+"=hang", "TMPDIR="+tmp)
	out, err := killed.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	killed.Stderr = killed.Stdout
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	defer killed.Process.Kill()
	var said []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.Contains(sc.Text(), "built ") {
		said = append(said, sc.Text())
	}
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // until the pipe closes
	}
	killed.Wait()
	left := builds()
	t.Logf("after the killed child: %d build directories: %v", len(left), left)
	if len(left) != 3 {
		t.Fatalf("the killed child left %d directories, want its own and the two made here: %v\nits output:\n%s",
			len(left), left, strings.Join(said, "\n"))
	}

	next := exec.Command(os.Args[0], "-test.run=^TestBuildChild$", "-test.v", "-test.timeout=120s")
	next.Env = append(os.Environ(), childEnv+"=1", "TMPDIR="+tmp)
	if b, err := next.CombinedOutput(); err != nil {
		t.Fatalf("second child: %v\n%s", err, b)
	}
	left = builds()
	t.Logf("after the next child: %d build directories: %v", len(left), left)
	if len(left) != 2 || left[0] != alive && left[1] != alive || left[0] != unnamed && left[1] != unnamed {
		t.Errorf("after the next run: %v, want only %s (its owner runs) and %s (no owner in its name)", left, alive, unnamed)
	}
}

// TestBuildChild builds testdata/hello in two tests; it does its work only
// as the child of TestBuildsRemovedAtExit or TestKilledRunsBuildsSwept (with
// COHORT_TEST_TESTBIN_CHILD=hang: it then waits, after the first build,
// until it is killed).
func TestBuildChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestBuildsRemovedAtExit")
	}
	var first string
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			bin := filepath.Join(Build(t, "./testdata/hello"), "hello")
			fi, err := os.Stat(bin)
			if err != nil {
				t.Fatal(err)
			}
			if first == "" {
				first = bin
			} else if bin != first {
				t.Errorf("built again: %s, then %s", first, bin)
			}
			// Built once: the second test finds the first one's file.
			t.Logf("built %s (%s)", bin, fi.ModTime().Format(time.RFC3339Nano))
			if os.Getenv(childEnv) == "hang" {
				os.Stdout.Sync()
				select {} // killed by TestKilledRunsBuildsSwept
			}
		})
	}
}

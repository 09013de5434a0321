package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestBuildChild builds testdata/hello in two tests; it does its work only
// as TestBuildsRemovedAtExit's child.
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
		})
	}
}

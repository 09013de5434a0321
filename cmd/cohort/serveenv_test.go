package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestServeRefusesUnknownEnv: a COHORT_ variable that cohort serve would
// not read (a misspelt setting) stops the start with exit 2, naming the
// variable and the setting it most likely meant, never its value; the
// variables read besides the flags' own are accepted.
func TestServeRefusesUnknownEnv(t *testing.T) {
	t.Setenv("COHORT_LISTENER", "SASL_SSL://0.0.0.0:9094")
	t.Setenv("COHORT_SUPERUSERS", "User:admin")
	t.Setenv("COHORT_ETCD_PASWORD", "s3cret-etcd-value")
	t.Setenv("COHORT_FROBNICATE", "1")
	// A port in use: a start that ignored the variables would fail
	// there (exit 1) rather than serve until the test times out.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := filepath.Join(t.TempDir(), "data")
	_, errOut, code := cli{t: t}.run("serve", "--listen", taken.Addr().String(), "--data-dir", dir, "--log-level", "error")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s", code, exitUsage, errOut)
	}
	for _, want := range []string{
		"$COHORT_LISTENER (did you mean COHORT_LISTENERS, --listeners?)",
		"$COHORT_SUPERUSERS (did you mean COHORT_SUPER_USERS, --super-users?)",
		"$COHORT_ETCD_PASWORD (did you mean COHORT_ETCD_PASSWORD?)",
		"$COHORT_FROBNICATE,", "are not settings of cohort serve: refusing to start",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "s3cret") || strings.Contains(errOut, "0.0.0.0") {
		t.Errorf("stderr shows a variable's value:\n%s", errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused start created its data directory (%v)", err)
	}

	fs := newServeFlags().fs
	ok := []string{"COHORT_DATA_DIR=/d", "COHORT_LISTENERS=x", "COHORT_BOOTSTRAP=h:1", "COHORT_SASL_PASSWORD=p",
		"COHORT_BOOTSTRAP_PASSWORD=p", "COHORT_ETCD_PASSWORD=p", "COHORT_TEST_AS_MAIN=1", "COHORT_BENCH=1",
		"COHORT_BENCH_REPEAT=3", "NOT_COHORT_X=1", "cohort_lower=1"}
	if err := checkServeEnv(fs, ok); err != nil {
		t.Errorf("variables cohort reads refused: %v", err)
	}
}

// TestServeEnvKnowsCohortVariables: every COHORT_ variable named in the
// repository's Go code (the tests' and benchmarks' included, which run
// cohort serve as a child that inherits them) is one that cohort serve
// accepts, so that adding one elsewhere does not make serve refuse to start.
func TestServeEnvKnowsCohortVariables(t *testing.T) {
	fs := newServeFlags().fs
	lit := regexp.MustCompile(`"(COHORT_[A-Z0-9_]*[A-Z0-9])[="]`)
	root := filepath.Join("..", "..")
	seen := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "serveenv_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			seen++
			if !knownServeEnv(fs, m[1]) {
				t.Errorf("%s names %s, which cohort serve refuses (add it to serveOtherEnv or testEnvPrefixes)", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 20 {
		t.Fatalf("found %d COHORT_ variables in the Go code: the walk missed the repository", seen)
	}
}

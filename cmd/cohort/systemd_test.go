package main

import (
	"bufio"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdExample: examples/systemd's environment file names only
// variables cohort serve reads, with values it accepts, and systemd accepts
// the unit (systemd-analyze verify, with ExecStart pointed at an existing
// file; any warning fails the test).
func TestSystemdExample(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "systemd")
	f, err := os.Open(filepath.Join(dir, "cohort.env"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]bool{"COHORT_BOOTSTRAP_PASSWORD": true, "COHORT_ETCD_PASSWORD": true} // read by serve, not flags
	s := newServeFlags()
	s.fs.VisitAll(func(fl *flag.Flag) { known[envName(fl.Name)] = true })
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !known[k] {
			t.Errorf("cohort.env: %q is not a variable cohort serve reads", line)
			continue
		}
		env[k] = v
	}
	if len(env) < 5 {
		t.Fatalf("cohort.env has %d settings", len(env))
	}
	if err := s.parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Errorf("cohort serve refuses cohort.env: %v", err)
	}
	if s.backupDir == "" || s.listeners == "" || s.bootstrapUser == "" {
		t.Errorf("cohort.env did not reach the flags: %+v", s)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze is not installed (Debian's systemd package)")
		}
		t.Skip("systemd-analyze is not installed: the unit is not verified")
	}
	unit, err := os.ReadFile(filepath.Join(dir, "cohort.service"))
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(unit), "ExecStart=/usr/local/bin/cohort ", "ExecStart="+exe+" ", 1)
	if text == string(unit) {
		t.Fatal("cohort.service has no ExecStart=/usr/local/bin/cohort line")
	}
	// The environment file need not exist for verify; keep the check local.
	tmp := filepath.Join(t.TempDir(), "cohort.service")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", tmp).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

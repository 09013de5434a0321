package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeFatalErrorFormat: the reason cohort serve exits is, under
// --log-format json, one JSON line at level ERROR with the exit code (every
// line of standard error is JSON), and under text the "cohort: ..." line as
// before. A configuration the node refuses is refused before anything else
// is logged, the heap's huge pages and floor included.
func TestServeFatalErrorFormat(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	serve := func(args ...string) (lines []string, code int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := cohortCommand(ctx, t, append([]string{"serve", "--data-dir", filepath.Join(t.TempDir(), "d")}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("serve %q: %v (it should have exited non-zero)\n%s", args, err, stderr.String())
		}
		return strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"), exit.ExitCode()
	}
	for _, c := range []struct {
		args     []string
		code     int
		err      string // in the fatal line
		oneLine  bool   // nothing else is logged
		jsonLogs bool
	}{
		{[]string{"--log-format", "json", "--listen", taken.Addr().String()}, exitError, "address already in use", false, true},
		{[]string{"--log-format", "json", "--log-level", "debug", "--listen", "0.0.0.0:0"}, exitUsage, "authenticates no one", true, true},
		{[]string{"--listen", taken.Addr().String()}, exitError, "address already in use", false, false},
		{[]string{"--log-level", "debug", "--listen", "0.0.0.0:0"}, exitUsage, "authenticates no one", true, false},
	} {
		lines, code := serve(c.args...)
		if code != c.code {
			t.Errorf("serve %q: exit %d, want %d\n%s", c.args, code, c.code, strings.Join(lines, "\n"))
			continue
		}
		if c.oneLine && len(lines) != 1 {
			t.Errorf("serve %q: %d lines, want only the reason:\n%s", c.args, len(lines), strings.Join(lines, "\n"))
		}
		last := lines[len(lines)-1]
		if !c.jsonLogs {
			if !strings.HasPrefix(last, "cohort: ") || !strings.Contains(last, c.err) {
				t.Errorf("serve %q: last line %q, want cohort: ...%s...", c.args, last, c.err)
			}
			continue
		}
		for _, l := range lines {
			if !json.Valid([]byte(l)) {
				t.Errorf("serve %q: a line that is not JSON: %q", c.args, l)
			}
		}
		var got struct {
			Level, Msg, Err string
			ExitCode        int `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(last), &got); err != nil {
			t.Errorf("serve %q: last line %q: %v", c.args, last, err)
			continue
		}
		if got.Level != "ERROR" || !strings.Contains(got.Err, c.err) || got.ExitCode != c.code {
			t.Errorf("serve %q: last line %q, want level ERROR, err with %q, exit_code %d", c.args, last, c.err, c.code)
		}
	}
}
